#!/usr/bin/env python3
"""Compiles CUDA probes with NVRTC on a machine without a GPU and prints ptxas's report
(registers, spills, wgmma serialisation warnings), the way benches/cuda_probe.py compiles
them (sm_90a, C++17) plus -Xptxas -v.

    eval "$(../shared/tools/nvrtc-local)"     # puts libnvrtc.so.13 on LD_LIBRARY_PATH
    python3 benches/probe/nvrtc_check.py FILE.cu [-DNAME=VALUE ...] [--ptx OUT.ptx] [--cubin OUT.cubin]

Exits non-zero when compilation fails or ptxas reports spill bytes."""
import ctypes
import re
import sys


def load():
    for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    sys.exit("libnvrtc not found: eval \"$(../shared/tools/nvrtc-local)\" first")


def check(lib, rc, what):
    if rc != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"{what}: {lib.nvrtcGetErrorString(rc).decode()}")


def get(lib, prog, size_fn, get_fn):
    n = ctypes.c_size_t()
    check(lib, getattr(lib, size_fn)(prog, ctypes.byref(n)), size_fn)
    buf = ctypes.create_string_buffer(n.value)
    check(lib, getattr(lib, get_fn)(prog, buf), get_fn)
    return buf.raw[: n.value]


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    defines = [a for a in args if a.startswith("-D")]
    ptx_out = args[args.index("--ptx") + 1] if "--ptx" in args else None
    cubin_out = args[args.index("--cubin") + 1] if "--cubin" in args else None
    lib = load()
    src = open(path, "rb").read()
    prog = ctypes.c_void_p()
    check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), src, path.encode(), 0, None, None),
          "nvrtcCreateProgram")
    opts = [b"--gpu-architecture=sm_90a", b"-std=c++17", b"-Xptxas", b"-v"]
    opts += [d.encode() for d in defines]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    log = get(lib, prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog").rstrip(b"\0").decode()
    print(f"== {path} {' '.join(defines)}")
    print(log.strip() or "(empty log)")
    if rc != 0:
        print("COMPILE FAILED")
        return 1
    cubin = get(lib, prog, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
    print(f"cubin: {len(cubin)} bytes")
    if cubin_out:
        open(cubin_out, "wb").write(cubin)
    if ptx_out:
        open(ptx_out, "wb").write(get(lib, prog, "nvrtcGetPTXSize", "nvrtcGetPTX").rstrip(b"\0"))
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", log)]
    if any(spills):
        print("SPILLS")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
