//! Vector forms of the operations that C's vector extensions lack, for the CPU's explicit
//! vector code (`c_vector.rs`): `max`, `min`, `abs`, a select on a comparison of floats,
//! `exp` and `tanh`, one set for each vector width (`tessel_v*` on `tessel_vf`,
//! `tessel_h*` on `tessel_hf`). Without them a loop computing any of these stayed a
//! scalar loop calling libm (`fmaxf`, `expf` and `tanhf` are calls that GCC does not
//! vectorize without `-ffast-math`), one call an element: every relu epilogue, a
//! softmax's `exp`, a GELU's `tanh`.
//!
//! The functions are written with the vector extensions alone (comparisons give lane
//! masks, selects blend bits), so they compile for every ISA the prelude names, and keep
//! IEEE behaviour where the checks look: a NaN in gives a NaN out (the NaN-poisoned
//! buffers of the correctness check stay visible through a `max`, where `fmaxf` would
//! hide them), infinities and overflow give what libm gives. `exp` is Cephes' `expf`
//! (argument reduction by `ln 2` in two parts, a degree-6 polynomial, the scale `2^n`
//! applied as two factors so that results down to the subnormals round once); `tanh` is
//! Cephes' `tanhf` (an odd polynomial below 0.625, `1 - 2 / (exp(2|x|) + 1)` above).
//! Both stay within a few units in the last place of libm over the whole float range
//! (`tests::vector_math_matches_libm` measures it with the system compiler).

/// The C prelude lines defining the vector math helpers of both widths (after
/// `c_vector::PRELUDE`, whose types and `*splat` helpers they use).
pub(super) const PRELUDE: &str = "\
typedef int tessel_vi __attribute__((vector_size(TESSEL_VLANES * 4)));
typedef int tessel_hi __attribute__((vector_size(TESSEL_HLANES * 4)));
#define TESSEL_VECTOR_MATH(P, F, I) \\
static inline F P##blend(I m, F a, F b) { return (F)(((I)a & m) | ((I)b & ~m)); } \\
static inline F P##max(F a, F b) { return P##blend((I)(a < b), b, a); } \\
static inline F P##min(F a, F b) { return P##blend((I)(b < a), b, a); } \\
static inline F P##abs(F x) { return (F)((I)x & 0x7fffffff); } \\
static inline F P##exp(F x) { \\
  I nan = (I)(x != x); \\
  F c = P##blend(nan, P##splat(0.0f), x); \\
  c = P##blend((I)(c < -104.0f), P##splat(-104.0f), c); \\
  c = P##blend((I)(c > 89.0f), P##splat(89.0f), c); \\
  F n = c * 1.44269504088896341f + 12582912.0f; \\
  n = n - 12582912.0f; \\
  F r = c - n * 0.693359375f; \\
  r = r - n * -2.12194440e-4f; \\
  F p = 1.9875691500e-4f * r + 1.3981999507e-3f; \\
  p = p * r + 8.3334519073e-3f; \\
  p = p * r + 4.1665795894e-2f; \\
  p = p * r + 1.6666665459e-1f; \\
  p = p * r + 5.0000001201e-1f; \\
  p = p * (r * r) + r + 1.0f; \\
  I k = __builtin_convertvector(n, I); \\
  I k1 = k >> 1; \\
  F s1 = (F)((k1 + 127) << 23); \\
  F s2 = (F)((k - k1 + 127) << 23); \\
  return P##blend(nan, x, p * s1 * s2); \\
} \\
static inline F P##tanh(F x) { \\
  F a = P##abs(x); \\
  F big = 1.0f - 2.0f / (P##exp(2.0f * a) + 1.0f); \\
  big = (F)((I)big | ((I)x & (int)0x80000000u)); \\
  F z = x * x; \\
  F p = -5.70498872745e-3f * z + 2.06390887954e-2f; \\
  p = p * z - 5.37397155531e-2f; \\
  p = p * z + 1.33314422036e-1f; \\
  p = p * z - 3.33332819422e-1f; \\
  F small = p * z * x + x; \\
  return P##blend((I)(a > 0.625f), big, small); \\
}
TESSEL_VECTOR_MATH(tessel_v, tessel_vf, tessel_vi)
TESSEL_VECTOR_MATH(tessel_h, tessel_hf, tessel_hi)
";

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;
    use std::process::Command;

    /// A C program that runs every helper of one width on inputs spread over the float
    /// range (and NaN, the infinities, the thresholds), printing the largest difference
    /// from libm in units in the last place, and a line for any IEEE case that differs.
    fn harness(width: &str) -> String {
        let mut c = String::from("#include <math.h>\n#include <stdio.h>\n#include <string.h>\n");
        c.push_str(super::super::c_vector::PRELUDE);
        c.push_str(super::PRELUDE);
        let _ = write!(
            c,
            r#"
#define P tessel_{w}
#define F tessel_{w}f
#define N ((int)(sizeof(F) / 4))
static double ulps(float got, float want) {{
  if (isnan(want)) return isnan(got) ? 0 : 1e30;
  if (isinf(want) || want == 0.0f) return got == want ? 0 : 1e30;
  double unit = nextafterf(fabsf(want), INFINITY) - fabsf(want);
  return fabs((double)got - (double)want) / unit;
}}
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
int main(void) {{
  static float xs[200000];
  int n = 0;
  float special[] = {{0.0f, -0.0f, 1e-30f, -1e-30f, 0.625f, -0.625f, 88.7f, 88.8f, 89.0f, 100.0f,
                      -87.3f, -103.9f, -104.0f, -110.0f, INFINITY, -INFINITY, NAN, 1e-5f, -3.0f}};
  for (unsigned i = 0; i < sizeof special / 4; i++) xs[n++] = special[i];
  for (int i = 0; n < 190000; i++) xs[n++] = -120.0f + 240.0f * (float)i / 189000.0f;
  while (n % 16) xs[n++] = 0.5f;
  double worst_exp = 0, worst_tanh = 0, worst_exact = 0;
  for (int i = 0; i < n; i += N) {{
    F x, zero, e, t, mx, mn, ab;
    memcpy(&x, xs + i, sizeof x);
    zero = CAT(P, splat)(0.0f);
    e = CAT(P, exp)(x); t = CAT(P, tanh)(x);
    mx = CAT(P, max)(x, zero); mn = CAT(P, min)(x, zero); ab = CAT(P, abs)(x);
    for (int l = 0; l < N; l++) {{
      float v = xs[i + l];
      double de = ulps(e[l], expf(v)), dt = ulps(t[l], tanhf(v));
      if (de > worst_exp) worst_exp = de;
      if (dt > worst_tanh) worst_tanh = dt;
      float wmx = isnan(v) ? v : fmaxf(v, 0.0f), wmn = isnan(v) ? v : fminf(v, 0.0f);
      double dx = ulps(mx[l], wmx) + ulps(mn[l], wmn) + ulps(ab[l], fabsf(v));
      if (dx > worst_exact) worst_exact = dx;
      if (de > 1e29 || dt > 1e29 || dx > 0) printf("case %g: exp %g tanh %g max %g min %g abs %g\n", v, e[l], t[l], mx[l], mn[l], ab[l]);
    }}
  }}
  printf("lanes %d exp %.2f tanh %.2f exact %.2f\n", N, worst_exp, worst_tanh, worst_exact);
  return 0;
}}
"#,
            w = width
        );
        c
    }

    /// Builds and runs the harness of one width with the flags kernels are built with;
    /// `None` where this machine has no C compiler.
    fn run_harness(width: &str) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("math.c");
        let exe = dir.path().join("math");
        std::fs::write(&src, harness(width)).unwrap();
        let isa = crate::target::cpu::VectorIsa::host().ok()?;
        let flags: Vec<String> = crate::measure::cpu::CpuToolchain::flags_for(isa)
            .into_iter()
            .filter(|f| f != "-shared" && f != "-fPIC")
            .collect();
        let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(&flags)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .arg("-lm")
            .output()
            .ok()?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Command::new(&exe).output().unwrap();
        assert!(run.status.success());
        Some(String::from_utf8(run.stdout).unwrap())
    }

    #[test]
    fn vector_math_matches_libm() {
        for width in ["v", "h"] {
            let Some(out) = run_harness(width) else {
                eprintln!("no C compiler: skipped");
                return;
            };
            // Every IEEE case (NaN, infinities, overflow, underflow to zero) as libm, and
            // max/min/abs exact: no `case` line.
            assert!(!out.contains("case"), "{out}");
            let last = out.lines().last().unwrap();
            eprintln!("{last}");
            let field = |name: &str| -> f64 {
                let mut it = last.split_whitespace();
                it.find(|w| *w == name);
                it.next().unwrap().parse().unwrap()
            };
            assert!(field("exp") <= 2.0, "{last}");
            assert!(field("tanh") <= 4.0, "{last}");
            assert_eq!(field("exact"), 0.0, "{last}");
        }
    }
}
