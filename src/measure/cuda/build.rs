//! Building CUDA C with NVRTC, straight to SASS (a CUBIN) for one real architecture.
//!
//! Works on a machine without a GPU: only libnvrtc (and libnvrtc-builtins beside it) is
//! needed. Every call creates its own NVRTC program, so many threads may compile at once
//! (the tuner compiles with rayon).

use crate::measure::{BuildInfo, Failure, FailureKind};
use cudarc::nvrtc::sys;
use std::ffi::{c_char, CStr, CString};
use std::sync::OnceLock;
use std::time::Instant;

/// A compiled translation unit: SASS for one architecture, with what `ptxas -v` reported.
#[derive(Clone, PartialEq)]
pub struct Cubin {
    /// The CUBIN (an ELF image), ready for `cuModuleLoadData`.
    pub bytes: Vec<u8>,
    /// The architecture it was built for (`sm_90a`).
    pub arch: String,
    /// Aggregated over all kernels of the unit: the maximum registers, spills and shared
    /// memory of any one kernel (each kernel launches on its own, so the worst one decides
    /// whether the unit fits the target).
    pub info: BuildInfo,
    /// The same report per kernel, in the order ptxas printed them.
    pub kernels: Vec<KernelReport>,
}

impl std::fmt::Debug for Cubin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cubin")
            .field("bytes", &format_args!("<{} bytes>", self.bytes.len()))
            .field("arch", &self.arch)
            .field("info", &self.info)
            .field("kernels", &self.kernels)
            .finish()
    }
}

/// What `ptxas -v` reported for one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelReport {
    pub name: String,
    pub registers: Option<u32>,
    pub spill_stores: Option<u32>,
    pub spill_loads: Option<u32>,
    pub stack_bytes: Option<u32>,
    pub shared_bytes: Option<u32>,
}

const NVRTC_MISSING: &str =
    "NVRTC not found: install nvidia-cuda-nvrtc (see README) or put libnvrtc.so.13 on LD_LIBRARY_PATH";

/// Whether libnvrtc can be loaded, checked without touching cudarc's loader (which panics
/// when the library is missing). The answer is computed once per process.
pub fn nvrtc_available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            // SAFETY: loads the library with the same candidate names cudarc's loader uses,
            // and only reports whether one loads; running its initialisers is what using
            // NVRTC would do anyway.
            if unsafe { sys::is_culib_present() } {
                Ok(())
            } else {
                Err(NVRTC_MISSING.to_string())
            }
        })
        .clone()
}

/// NVRTC's version as (major, minor), or the reason it is unavailable.
pub fn nvrtc_version() -> Result<(u32, u32), String> {
    nvrtc_available()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is present (checked above); both out-pointers are valid.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| format!("nvrtcVersion failed: {e}"))?;
    Ok((major as u32, minor as u32))
}

/// Compiles one CUDA C translation unit (all kernels of a `Source`) to a CUBIN for `arch`
/// (a real architecture such as `sm_90a` or `sm_80`), with `-Xptxas -v` so the log reports
/// registers, spills and shared memory per kernel. Strict IEEE fp32: no fast math.
///
/// Errors: NVRTC missing, a non-real `arch`, or a compile error are all
/// `FailureKind::Compile`; a compile error's message is NVRTC's log.
pub fn compile(code: &str, arch: &str) -> Result<Cubin, Failure> {
    let fail = |m: String| Failure::new(FailureKind::Compile, m);
    nvrtc_available().map_err(fail)?;
    if !arch.starts_with("sm_")
        || arch.len() < 5
        || !arch[3..].chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(fail(format!(
            "arch {arch:?} is not a real GPU architecture such as sm_90a (a CUBIN needs one)"
        )));
    }
    let src = CString::new(code).map_err(|_| fail("the CUDA source contains a NUL byte".into()))?;
    let options: Vec<CString> = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".into(),
        "-Xptxas=-v".into(),
    ]
    .into_iter()
    .map(|o| CString::new(o).expect("options have no NUL"))
    .collect();
    let start = Instant::now();
    let program = Program::new(&src).map_err(fail)?;
    let compiled = program.compile(&options);
    let log = program.log().unwrap_or_else(|e| format!("(no log: {e})"));
    let compile_seconds = start.elapsed().as_secs_f64();
    if let Err(e) = compiled {
        let hint = if e == sys::nvrtcResult::NVRTC_ERROR_BUILTIN_OPERATION_FAILURE {
            " (is libnvrtc-builtins on LD_LIBRARY_PATH beside libnvrtc?)"
        } else {
            ""
        };
        return Err(fail(format!("NVRTC {e:?}{hint}\n{log}")));
    }
    let bytes = program.cubin().map_err(fail)?;
    let kernels = parse_ptxas_report(&log);
    let max = |f: fn(&KernelReport) -> Option<u32>| kernels.iter().filter_map(f).max();
    let info = BuildInfo {
        compile_seconds,
        registers: max(|k| k.registers),
        spill_stores: max(|k| k.spill_stores),
        spill_loads: max(|k| k.spill_loads),
        stack_bytes: max(|k| k.stack_bytes),
        shared_bytes: max(|k| k.shared_bytes),
        log,
    };
    Ok(Cubin {
        bytes,
        arch: arch.to_string(),
        info,
        kernels,
    })
}

/// Compiles one CUDA C translation unit to PTX for the virtual architecture of `arch`
/// (`sm_90a` -> `compute_90a`): what NVRTC makes of the generated source before ptxas,
/// for a reader (`tessel show --emit ptx`). Errors as [`compile`]'s.
pub fn compile_ptx(code: &str, arch: &str) -> Result<String, Failure> {
    let fail = |m: String| Failure::new(FailureKind::Compile, m);
    nvrtc_available().map_err(fail)?;
    let virtual_arch = match arch.strip_prefix("sm_") {
        Some(rest) if !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric()) => {
            format!("compute_{rest}")
        }
        _ => {
            return Err(fail(format!(
                "arch {arch:?} is not a GPU architecture such as sm_90a"
            )))
        }
    };
    let src = CString::new(code).map_err(|_| fail("the CUDA source contains a NUL byte".into()))?;
    let options: Vec<CString> = [
        format!("--gpu-architecture={virtual_arch}"),
        "--std=c++17".into(),
    ]
    .into_iter()
    .map(|o| CString::new(o).expect("options have no NUL"))
    .collect();
    let program = Program::new(&src).map_err(fail)?;
    if let Err(e) = program.compile(&options) {
        let log = program.log().unwrap_or_else(|e| format!("(no log: {e})"));
        return Err(fail(format!("NVRTC {e:?}\n{log}")));
    }
    program.ptx().map_err(fail)
}

/// An NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Program {
    fn new(src: &CStr) -> Result<Program, String> {
        let mut prog = std::mem::MaybeUninit::uninit();
        let name = c"tessel.cu";
        // SAFETY: NVRTC is loaded; `src` and `name` are NUL-terminated and outlive the call;
        // no headers are passed.
        unsafe {
            sys::nvrtcCreateProgram(
                prog.as_mut_ptr(),
                src.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        }
        .result()
        .map_err(|e| format!("nvrtcCreateProgram failed: {e:?}"))?;
        // SAFETY: initialised by the successful call above.
        Ok(Program(unsafe { prog.assume_init() }))
    }

    fn compile(&self, options: &[CString]) -> Result<(), sys::nvrtcResult> {
        let ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        // SAFETY: `ptrs` holds `ptrs.len()` valid C strings that outlive the call.
        unsafe { sys::nvrtcCompileProgram(self.0, ptrs.len() as i32, ptrs.as_ptr()) }
            .result()
            .map_err(|e| e.0)
    }

    fn log(&self) -> Result<String, String> {
        let mut size = 0usize;
        // SAFETY: valid program and out-pointer; the buffer has the size NVRTC asked for.
        unsafe {
            sys::nvrtcGetProgramLogSize(self.0, &mut size)
                .result()
                .map_err(|e| format!("{e:?}"))?;
            let mut buf = vec![0u8; size.max(1)];
            sys::nvrtcGetProgramLog(self.0, buf.as_mut_ptr() as *mut c_char)
                .result()
                .map_err(|e| format!("{e:?}"))?;
            Ok(c_string_lossy(&buf))
        }
    }

    fn ptx(&self) -> Result<String, String> {
        let mut size = 0usize;
        // SAFETY: valid, compiled program; the buffer has the size NVRTC asked for.
        unsafe {
            sys::nvrtcGetPTXSize(self.0, &mut size)
                .result()
                .map_err(|e| format!("nvrtcGetPTXSize failed: {e:?}"))?;
            let mut buf = vec![0u8; size.max(1)];
            sys::nvrtcGetPTX(self.0, buf.as_mut_ptr() as *mut c_char)
                .result()
                .map_err(|e| format!("nvrtcGetPTX failed: {e:?}"))?;
            Ok(c_string_lossy(&buf))
        }
    }

    fn cubin(&self) -> Result<Vec<u8>, String> {
        let mut size = 0usize;
        // SAFETY: valid, compiled program; the buffer has the size NVRTC asked for.
        unsafe {
            sys::nvrtcGetCUBINSize(self.0, &mut size)
                .result()
                .map_err(|e| format!("nvrtcGetCUBINSize failed: {e:?}"))?;
            if size == 0 {
                return Err("NVRTC produced no CUBIN (was a virtual architecture given?)".into());
            }
            let mut buf = vec![0u8; size];
            sys::nvrtcGetCUBIN(self.0, buf.as_mut_ptr() as *mut c_char)
                .result()
                .map_err(|e| format!("nvrtcGetCUBIN failed: {e:?}"))?;
            Ok(buf)
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once.
        // A failure here leaks one program; there is nothing better to do in a destructor.
        let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
    }
}

fn c_string_lossy(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Reads the per-kernel `ptxas -v` report out of an NVRTC log:
///
/// ```text
/// ptxas info    : Compiling entry function 'vadd' for 'sm_90a'
/// ptxas info    : Function properties for vadd
///     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 8 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]
/// ```
///
/// Device functions that were not inlined get "Function properties" entries of their own;
/// only entry functions are reported.
pub fn parse_ptxas_report(log: &str) -> Vec<KernelReport> {
    let mut kernels: Vec<KernelReport> = Vec::new();
    // Which kernel the "Function properties" line that came last belongs to, if an entry.
    let mut properties_of: Option<usize> = None;
    for line in log.lines() {
        let line = line.trim();
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or("").to_string();
            kernels.push(KernelReport {
                name,
                ..KernelReport::default()
            });
            properties_of = None;
        } else if let Some(rest) = line.split("Function properties for ").nth(1) {
            properties_of = kernels.iter().position(|k| k.name == rest.trim());
        } else if line.contains("bytes stack frame") {
            if let Some(k) = properties_of.and_then(|i| kernels.get_mut(i)) {
                k.stack_bytes = number_before(line, "bytes stack frame");
                k.spill_stores = number_before(line, "bytes spill stores");
                k.spill_loads = number_before(line, "bytes spill loads");
            }
        } else if line.contains("Used ") && line.contains(" registers") {
            if let Some(k) = kernels.last_mut() {
                k.registers = line
                    .split("Used ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok());
                k.shared_bytes = Some(number_before(line, "bytes smem").unwrap_or(0));
            }
        }
    }
    kernels
}

/// The integer just before `unit` in a report line.
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let (before, _) = line.split_once(unit)?;
    before.split_whitespace().next_back()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether NVRTC tests should run. NVRTC missing is a failure unless
    /// `TESSEL_NO_NVRTC=1` says this machine deliberately has none.
    fn nvrtc_required() -> bool {
        match nvrtc_available() {
            Ok(()) => true,
            Err(_) if std::env::var("TESSEL_NO_NVRTC").as_deref() == Ok("1") => {
                eprintln!("skipped: NVRTC not available and TESSEL_NO_NVRTC=1");
                false
            }
            Err(e) => panic!("{e} (set TESSEL_NO_NVRTC=1 to skip NVRTC tests deliberately)"),
        }
    }

    const VADD: &str = r#"
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"#;

    #[test]
    fn compiles_a_kernel_to_a_cubin_with_a_report() {
        if !nvrtc_required() {
            return;
        }
        let cubin = compile(VADD, "sm_90a").unwrap();
        assert_eq!(&cubin.bytes[..4], b"\x7fELF");
        assert_eq!(cubin.kernels.len(), 1, "{}", cubin.info.log);
        assert_eq!(cubin.kernels[0].name, "vadd");
        let regs = cubin.info.registers.expect("register count in the log");
        assert!((4..=64).contains(&regs), "{regs} registers");
        assert_eq!(cubin.info.spill_stores, Some(0));
        assert_eq!(cubin.info.spill_loads, Some(0));
        assert_eq!(cubin.info.shared_bytes, Some(0));
        assert!(cubin.info.compile_seconds > 0.0);
    }

    #[test]
    fn reports_shared_memory_of_each_kernel() {
        if !nvrtc_required() {
            return;
        }
        let code = r#"
extern "C" __global__ void small(float* x) { __shared__ float s[256]; s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[255 - threadIdx.x]; }
extern "C" __global__ void big(float* x) { __shared__ float s[4096]; s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[4095 - threadIdx.x]; }
"#;
        let cubin = compile(code, "sm_80").unwrap();
        let smem = |n: &str| {
            cubin
                .kernels
                .iter()
                .find(|k| k.name == n)
                .and_then(|k| k.shared_bytes)
        };
        assert_eq!(smem("small"), Some(1024), "{}", cubin.info.log);
        assert_eq!(smem("big"), Some(16384));
        assert_eq!(cubin.info.shared_bytes, Some(16384));
    }

    #[test]
    fn a_compile_error_is_a_compile_failure_with_the_log() {
        if !nvrtc_required() {
            return;
        }
        let err = compile(
            "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }",
            "sm_90a",
        )
        .unwrap_err();
        assert_eq!(err.kind, FailureKind::Compile);
        assert!(err.message.contains("undefined_name"), "{}", err.message);
    }

    #[test]
    fn static_shared_memory_above_48_kb_compiles_so_limits_are_checked_elsewhere() {
        // ptxas for sm_90a accepts 64 KB of static shared memory; the 48 KB static limit
        // only bites at launch. Postprocessors must check `CudaLimits` before compiling.
        if !nvrtc_required() {
            return;
        }
        let code = "extern \"C\" __global__ void k(float* x) { __shared__ float s[16384]; s[threadIdx.x] = x[0]; __syncthreads(); x[threadIdx.x] = s[16383 - threadIdx.x]; }";
        let cubin = compile(code, "sm_90a").unwrap();
        assert_eq!(cubin.info.shared_bytes, Some(65536));
        assert_eq!(cubin.kernels[0].stack_bytes, Some(0), "{}", cubin.info.log);
    }

    #[test]
    fn a_local_array_indexed_at_run_time_is_a_stack_frame_without_spills() {
        // What the `max_stack_bytes` limit catches: an accumulator tile the compiler
        // cannot keep in registers because a loop over it is not unrolled.
        if !nvrtc_required() {
            return;
        }
        let code = "extern \"C\" __global__ void k(float* x, int n) { float acc[64]; for (int i = 0; i < 64; ++i) acc[i] = 0.0f; for (int i = 0; i < n; ++i) acc[(i * 7) % 64] += x[i]; x[threadIdx.x] = acc[threadIdx.x % 64]; }";
        let cubin = compile(code, "sm_90a").unwrap();
        assert!(
            cubin.info.stack_bytes.is_some_and(|b| b >= 256),
            "{}",
            cubin.info.log
        );
        assert_eq!(cubin.info.spill_bytes(), 0, "{}", cubin.info.log);
    }

    #[test]
    fn a_virtual_arch_is_refused() {
        let err = compile(VADD, "compute_90").unwrap_err();
        assert_eq!(err.kind, FailureKind::Compile);
    }

    #[test]
    fn compiles_from_many_threads_at_once() {
        if !nvrtc_required() {
            return;
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    s.spawn(move || compile(&VADD.replace("vadd", &format!("vadd{i}")), "sm_90a"))
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                let cubin = h.join().unwrap().unwrap();
                assert_eq!(cubin.kernels[0].name, format!("vadd{i}"));
            }
        });
    }

    #[test]
    fn parses_a_ptxas_report() {
        let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm' for 'sm_90a'
ptxas info    : Function properties for gemm
ptxas         .     8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8 bytes cumulative stack size, 32768 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'epilogue' for 'sm_90a'
ptxas info    : Function properties for epilogue
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 380 bytes cmem[0]
";
        let ks = parse_ptxas_report(log);
        assert_eq!(
            ks,
            vec![
                KernelReport {
                    name: "gemm".into(),
                    registers: Some(255),
                    spill_stores: Some(12),
                    spill_loads: Some(16),
                    stack_bytes: Some(8),
                    shared_bytes: Some(32768)
                },
                KernelReport {
                    name: "epilogue".into(),
                    registers: Some(10),
                    spill_stores: Some(0),
                    spill_loads: Some(0),
                    stack_bytes: Some(0),
                    shared_bytes: Some(0)
                },
            ]
        );
    }
}
