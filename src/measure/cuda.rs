//! The CUDA side of measurement (NVRTC build, launch, timing, cuBLAS peer).
