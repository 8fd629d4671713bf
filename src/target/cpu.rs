//! The host CPU as a target: model, cores, vector ISA, cache sizes and the C compiler,
//! read from `/proc/cpuinfo`, `/sys/devices/system/cpu` and `cc --version`.
//!
//! The vector ISA ([`VectorIsa`]) is what kernels are built for: it names the target in
//! the fingerprint (`x86_64-avx2+fma`), gives the compiler flags (`-mavx2 -mfma`, never
//! `-march=native`, so that a record says what it was built for), and the vector width
//! and register count the CPU sketch sizes its register tiles by.
//!
//! It is the widest the CPU reports, unless the environment variable `TESSEL_CPU_ISA`
//! ([`ISA_VAR`]) names a narrower one: `avx2+fma` (or `avx2`) on an AVX-512 host builds,
//! fingerprints and sizes tiles for AVX2, as for a fleet of AVX2 servers; `none` builds
//! for the architecture's baseline. The names are those of the fingerprint (`avx512f`,
//! `avx2+fma`, `neon`, `none`), in any case. The order is `none` < `avx2+fma` <
//! `avx512f` on x86_64 and `none` < `neon` on aarch64; a value the CPU cannot run (wider
//! than its ISA, or another architecture's) or an unknown one is an error naming the
//! variable ([`isa_override`]), reported by [`VectorIsa::host`] and [`CpuInfo::query`].
//!
//! Reading the machine never fails: what it does not report (another OS, a container
//! that hides `/sys`) stays `"unknown"` or 0, and the fingerprint says so. The parsers are
//! pure functions over the files' text, tested on captured samples.

use super::TargetFingerprint;
use std::path::Path;
use std::process::Command;

/// What tessel knows about the host CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuInfo {
    /// `model name` from `/proc/cpuinfo`.
    pub model_name: String,
    /// Physical cores (distinct `physical id`/`core id` pairs), or `threads` when the
    /// machine does not say.
    pub cores: usize,
    /// Hardware threads this process may run on.
    pub threads: usize,
    /// The vector ISA kernels are built for (the CPU's, or the narrower one
    /// `TESSEL_CPU_ISA` names).
    pub isa: VectorIsa,
    /// Data cache sizes per level in bytes (0 when unknown).
    pub l1d_bytes: u64,
    pub l2_bytes: u64,
    pub l3_bytes: u64,
    /// First line of `<cc> --version`, when a compiler answered.
    pub cc_version: Option<String>,
}

impl CpuInfo {
    /// Queries the machine; `cc` is the C compiler kernels are built with. Fails only
    /// where `TESSEL_CPU_ISA` names an ISA this CPU cannot run ([`isa_override`]).
    pub fn query(cc: &str) -> Result<CpuInfo, String> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let parsed = parse_cpuinfo(&cpuinfo);
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let caches = read_caches(Path::new("/sys/devices/system/cpu/cpu0/cache"));
        let isa = isa_override(VectorIsa::from_flags(&parsed.flags), isa_var().as_deref())?;
        Ok(CpuInfo {
            model_name: parsed.model_name.unwrap_or_else(|| "unknown".to_string()),
            cores: if parsed.cores > 0 {
                parsed.cores.min(threads.max(1))
            } else {
                threads
            },
            threads,
            isa,
            l1d_bytes: caches.l1d,
            l2_bytes: caches.l2,
            l3_bytes: caches.l3,
            cc_version: cc_version(cc),
        })
    }

    /// The instruction-set name used in fingerprints and for arch fallback:
    /// `x86_64-avx2+fma`, `x86_64-avx512f`, `aarch64-neon`.
    pub fn arch(&self) -> String {
        format!("{}-{}", std::env::consts::ARCH, self.isa.name())
    }

    /// The size of the largest cache level reported (0 when none is).
    pub fn last_level_cache_bytes(&self) -> u64 {
        self.l3_bytes.max(self.l2_bytes).max(self.l1d_bytes)
    }

    /// The database fingerprint of this CPU built with the given compiler flags, kernels
    /// run on `threads` OpenMP threads.
    pub fn fingerprint(&self, flags: &[String], threads: usize) -> TargetFingerprint {
        let cc = self
            .cc_version
            .clone()
            .unwrap_or_else(|| "no C compiler".to_string());
        TargetFingerprint {
            kind: "cpu".to_string(),
            arch: self.arch(),
            device: format!(
                "{} ({} cores, {} threads)",
                self.model_name, self.cores, self.threads
            ),
            toolchain: format!("{cc}; {}; {threads} threads", flags.join(" ")),
        }
    }
}

/// What `/proc/cpuinfo` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedCpuinfo {
    pub model_name: Option<String>,
    /// Distinct (physical id, core id) pairs; 0 when the file has none.
    pub cores: usize,
    /// The first processor's feature flags (`flags` on x86, `Features` on ARM).
    pub flags: Vec<String>,
}

/// Parses the text of `/proc/cpuinfo`.
pub fn parse_cpuinfo(text: &str) -> ParsedCpuinfo {
    let mut out = ParsedCpuinfo::default();
    let mut pairs = std::collections::BTreeSet::new();
    let mut physical: Option<String> = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "model name" | "Model" if out.model_name.is_none() => {
                out.model_name = Some(value.to_string())
            }
            "flags" | "Features" if out.flags.is_empty() => {
                out.flags = value.split_whitespace().map(str::to_string).collect();
            }
            "physical id" => physical = Some(value.to_string()),
            "core id" => {
                pairs.insert((physical.clone().unwrap_or_default(), value.to_string()));
            }
            _ => {}
        }
    }
    out.cores = pairs.len();
    out
}

/// The vector instruction set kernels are compiled for: the widest of those tessel
/// builds for that the CPU reports (`flags` on x86, `Features` on ARM), or a narrower one
/// named by `TESSEL_CPU_ISA`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum VectorIsa {
    /// AVX-512 Foundation (with AVX2 and FMA): 16 float lanes, 32 vector registers.
    Avx512f,
    /// AVX2 with FMA3: 8 float lanes, 16 vector registers.
    Avx2Fma,
    /// ARM Advanced SIMD: 4 float lanes, 32 vector registers.
    Neon,
    /// None of those: the architecture's baseline (SSE2 on x86_64: 4 lanes, 16 registers;
    /// elsewhere scalar code).
    Baseline,
}

impl VectorIsa {
    /// The ISA of a CPU with these feature flags.
    pub fn from_flags(flags: &[String]) -> VectorIsa {
        let has = |f: &str| flags.iter().any(|x| x == f);
        if has("avx512f") && has("avx2") && has("fma") {
            VectorIsa::Avx512f
        } else if has("avx2") && has("fma") {
            VectorIsa::Avx2Fma
        } else if has("asimd") || cfg!(target_arch = "aarch64") {
            VectorIsa::Neon
        } else {
            VectorIsa::Baseline
        }
    }

    /// The name in fingerprints: `avx512f`, `avx2+fma`, `neon`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            VectorIsa::Avx512f => "avx512f",
            VectorIsa::Avx2Fma => "avx2+fma",
            VectorIsa::Neon => "neon",
            VectorIsa::Baseline => "none",
        }
    }

    /// The C compiler flags that enable the ISA (none where it is the baseline). F16C
    /// (float16 conversions, what a kernel of float16 buffers converts with) comes with
    /// both x86 ISAs: every AVX2 processor has it.
    pub fn cc_flags(self) -> &'static [&'static str] {
        match self {
            VectorIsa::Avx512f => &["-mavx512f", "-mavx2", "-mfma", "-mf16c"],
            VectorIsa::Avx2Fma => &["-mavx2", "-mfma", "-mf16c"],
            VectorIsa::Neon | VectorIsa::Baseline => &[],
        }
    }

    /// float32 lanes of one vector register.
    pub fn f32_lanes(self) -> i64 {
        match self {
            VectorIsa::Avx512f => 16,
            VectorIsa::Avx2Fma => 8,
            VectorIsa::Neon => 4,
            VectorIsa::Baseline if cfg!(target_arch = "x86_64") => 4,
            VectorIsa::Baseline => 1,
        }
    }

    /// Architectural vector registers.
    pub fn vector_registers(self) -> i64 {
        match self {
            VectorIsa::Avx512f | VectorIsa::Neon => 32,
            VectorIsa::Avx2Fma | VectorIsa::Baseline => 16,
        }
    }

    /// The ISA named `name` in a fingerprint (`avx512f`, `avx2+fma`, `neon`, `none`; also
    /// `avx2` for `avx2+fma`), in any case.
    pub fn parse(name: &str) -> Option<VectorIsa> {
        match name.trim().to_ascii_lowercase().as_str() {
            "avx512f" => Some(VectorIsa::Avx512f),
            "avx2+fma" | "avx2" => Some(VectorIsa::Avx2Fma),
            "neon" => Some(VectorIsa::Neon),
            "none" => Some(VectorIsa::Baseline),
            _ => None,
        }
    }

    /// The ISAs a CPU of this ISA runs, widest first: itself and the narrower ones of its
    /// architecture (`none` < `avx2+fma` < `avx512f`; `none` < `neon`).
    pub fn runnable(self) -> &'static [VectorIsa] {
        match self {
            VectorIsa::Avx512f => &[VectorIsa::Avx512f, VectorIsa::Avx2Fma, VectorIsa::Baseline],
            VectorIsa::Avx2Fma => &[VectorIsa::Avx2Fma, VectorIsa::Baseline],
            VectorIsa::Neon => &[VectorIsa::Neon, VectorIsa::Baseline],
            VectorIsa::Baseline => &[VectorIsa::Baseline],
        }
    }

    /// The widest ISA this machine's CPU reports in `/proc/cpuinfo` (the baseline where it
    /// cannot be read), whatever `TESSEL_CPU_ISA` says.
    pub fn detected() -> VectorIsa {
        let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        VectorIsa::from_flags(&parse_cpuinfo(&text).flags)
    }

    /// The ISA kernels are built for on this machine: [`detected`](Self::detected),
    /// narrowed by `TESSEL_CPU_ISA` where it is set; an error where it names an ISA the
    /// CPU cannot run or none tessel knows.
    pub fn host() -> Result<VectorIsa, String> {
        isa_override(VectorIsa::detected(), isa_var().as_deref())
    }
}

/// The environment variable that narrows the vector ISA kernels are built for.
pub const ISA_VAR: &str = "TESSEL_CPU_ISA";

/// The value of [`ISA_VAR`], `None` where it is unset or blank.
fn isa_var() -> Option<String> {
    std::env::var(ISA_VAR).ok().filter(|s| !s.trim().is_empty())
}

/// The ISA to build for on a CPU whose widest is `host`, given `TESSEL_CPU_ISA`'s
/// `value`: `host` without one, else the ISA it names where the CPU runs it (see
/// [`VectorIsa::runnable`]); an error naming the variable, the value and the choices
/// otherwise.
pub fn isa_override(host: VectorIsa, value: Option<&str>) -> Result<VectorIsa, String> {
    let Some(value) = value else {
        return Ok(host);
    };
    let choices = host.runnable();
    let names: Vec<&str> = choices.iter().map(|i| i.name()).collect();
    let choose = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    };
    match VectorIsa::parse(value) {
        Some(isa) if choices.contains(&isa) => Ok(isa),
        Some(_) => Err(format!(
            "{ISA_VAR}={value}: this CPU supports {} at most (choose {choose})",
            host.name()
        )),
        None => Err(format!(
            "{ISA_VAR}={value}: unknown vector ISA (choose {choose})"
        )),
    }
}

/// The largest cache reported under `/sys` for cpu0 (0 when none is), without running
/// the compiler as [`CpuInfo::query`] does.
pub fn last_level_cache_bytes_sysfs() -> u64 {
    let c = read_caches(Path::new("/sys/devices/system/cpu/cpu0/cache"));
    c.l3.max(c.l2).max(c.l1d)
}

/// Data and unified cache sizes by level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheSizes {
    pub l1d: u64,
    pub l2: u64,
    pub l3: u64,
}

/// Reads `index*/{level,type,size}` under a `cpuN/cache` directory.
fn read_caches(dir: &Path) -> CacheSizes {
    let mut sizes = CacheSizes::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return sizes;
    };
    for entry in entries.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).unwrap_or_default();
        add_cache(
            &mut sizes,
            read("level").trim(),
            read("type").trim(),
            read("size").trim(),
        );
    }
    sizes
}

/// Records one cache described as sysfs does (`level` "2", `type` "Unified", `size`
/// "2048K"); instruction caches are skipped.
pub fn add_cache(sizes: &mut CacheSizes, level: &str, kind: &str, size: &str) {
    if kind == "Instruction" {
        return;
    }
    let Some(bytes) = parse_size(size) else {
        return;
    };
    match level {
        "1" => sizes.l1d = sizes.l1d.max(bytes),
        "2" => sizes.l2 = sizes.l2.max(bytes),
        "3" => sizes.l3 = sizes.l3.max(bytes),
        _ => {}
    }
}

/// Parses a sysfs cache size: `48K`, `2048K`, `32M`, or plain bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.trim().parse::<u64>().ok().map(|n| n * mult)
}

/// The first line of `<cc> --version`, or `None` when it does not run.
pub fn cc_version(cc: &str) -> Option<String> {
    let out = Command::new(cc).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str =
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n\
physical id\t: 0\ncore id\t\t: 0\nflags\t\t: fpu sse sse2 sse4_2 avx avx2 fma\n\n\
processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Processor\nphysical id\t: 0\ncore id\t\t: 1\n\
flags\t\t: fpu sse sse2 sse4_2 avx avx2 fma\n";

    #[test]
    fn parses_x86_cpuinfo() {
        let p = parse_cpuinfo(X86);
        assert_eq!(p.model_name.as_deref(), Some("Intel(R) Xeon(R) Processor"));
        assert_eq!(p.cores, 2);
        assert_eq!(VectorIsa::from_flags(&p.flags), VectorIsa::Avx2Fma);
    }

    #[test]
    fn isa_prefers_the_widest_and_needs_fma() {
        let flags = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let isa = VectorIsa::from_flags(&flags("sse4_2 avx avx2 fma avx512f"));
        assert_eq!(isa, VectorIsa::Avx512f);
        assert_eq!((isa.f32_lanes(), isa.vector_registers()), (16, 32));
        assert_eq!(isa.cc_flags(), &["-mavx512f", "-mavx2", "-mfma", "-mf16c"]);
        let isa = VectorIsa::from_flags(&flags("sse4_2 avx avx2 fma"));
        assert_eq!((isa.name(), isa.f32_lanes()), ("avx2+fma", 8));
        if cfg!(target_arch = "x86_64") {
            // AVX2 without FMA (some VIA and early Intel parts) builds for the baseline.
            assert_eq!(
                VectorIsa::from_flags(&flags("sse4_2 avx avx2")),
                VectorIsa::Baseline
            );
            assert_eq!(VectorIsa::from_flags(&flags("sse2")).name(), "none");
        }
    }

    #[test]
    fn parses_sysfs_cache_sizes() {
        let mut c = CacheSizes::default();
        add_cache(&mut c, "1", "Data", "48K");
        add_cache(&mut c, "1", "Instruction", "64K");
        add_cache(&mut c, "2", "Unified", "2048K");
        add_cache(&mut c, "3", "Unified", "260M");
        add_cache(&mut c, "3", "Unified", "garbage");
        assert_eq!(
            c,
            CacheSizes {
                l1d: 48 << 10,
                l2: 2 << 20,
                l3: 260 << 20
            }
        );
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn queries_this_machine() {
        let info = CpuInfo::query("cc").unwrap();
        assert!(info.threads >= 1 && info.cores >= 1);
        let fp = info.fingerprint(&["-O3".to_string()], 2);
        assert_eq!(fp.kind, "cpu");
        assert_eq!(Ok(info.isa), VectorIsa::host());
        assert!(fp.arch.starts_with(std::env::consts::ARCH));
        assert!(fp.arch.ends_with(info.isa.name()), "{}", fp.arch);
        assert!(fp.toolchain.ends_with("-O3; 2 threads"), "{}", fp.toolchain);
    }

    #[test]
    fn isa_override_narrows_and_accepts_the_alias_in_any_case() {
        use VectorIsa::*;
        assert_eq!(isa_override(Avx512f, None), Ok(Avx512f));
        assert_eq!(isa_override(Avx512f, Some("avx2+fma")), Ok(Avx2Fma));
        assert_eq!(isa_override(Avx512f, Some("avx2")), Ok(Avx2Fma));
        assert_eq!(isa_override(Avx512f, Some("AVX2")), Ok(Avx2Fma));
        assert_eq!(isa_override(Avx512f, Some("Avx512F")), Ok(Avx512f));
        assert_eq!(isa_override(Avx512f, Some("none")), Ok(Baseline));
        assert_eq!(isa_override(Avx2Fma, Some("NONE")), Ok(Baseline));
        assert_eq!(isa_override(Neon, Some("neon")), Ok(Neon));
        assert_eq!(isa_override(Neon, Some("none")), Ok(Baseline));
        assert_eq!(isa_override(Baseline, Some("none")), Ok(Baseline));
        // The names round-trip through the fingerprint's.
        for isa in [Avx512f, Avx2Fma, Neon, Baseline] {
            assert_eq!(VectorIsa::parse(isa.name()), Some(isa));
        }
    }

    #[test]
    fn isa_override_refuses_unknown_and_wider_isas() {
        use VectorIsa::*;
        assert_eq!(
            isa_override(Avx2Fma, Some("avx512f")),
            Err(
                "TESSEL_CPU_ISA=avx512f: this CPU supports avx2+fma at most \
                 (choose avx2+fma or none)"
                    .to_string()
            )
        );
        let e = isa_override(Avx512f, Some("neon")).unwrap_err();
        assert_eq!(
            e,
            "TESSEL_CPU_ISA=neon: this CPU supports avx512f at most \
             (choose avx512f, avx2+fma or none)"
        );
        let e = isa_override(Neon, Some("avx2")).unwrap_err();
        assert!(
            e.contains("supports neon at most (choose neon or none)"),
            "{e}"
        );
        let e = isa_override(Baseline, Some("avx2+fma")).unwrap_err();
        assert!(e.ends_with("(choose none)"), "{e}");
        let e = isa_override(Avx512f, Some("bogus")).unwrap_err();
        assert_eq!(
            e,
            "TESSEL_CPU_ISA=bogus: unknown vector ISA (choose avx512f, avx2+fma or none)"
        );
    }
}
