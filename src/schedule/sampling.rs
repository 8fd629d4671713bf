//! `sample_perfect_tile`, `sample_tile` and `sample_categorical`: the random decisions of
//! a design space.
//!
//! `sample_perfect_tile` draws factors whose product is the loop's extent; `sample_tile`
//! also draws factors whose product exceeds it (the split gets a predicate), bounded by
//! the share of the padded iterations that may be wasted.
//!
//! Sampling uses a seeded ChaCha generator, so the same seed proposes the same candidates
//! on every platform. A given decision is validated instead of sampled.

use super::error::{Result, ScheduleError};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

fn prime_factors(mut n: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut d = 2;
    while d * d <= n {
        while n % d == 0 {
            out.push(d);
            n /= d;
        }
        d += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// Checks a tile decision: `n` positive factors multiplying to `extent`, the innermost
/// at most `max_innermost`.
pub fn check_tile(
    extent: i64,
    n: usize,
    max_innermost: i64,
    tiles: &[i64],
) -> std::result::Result<(), String> {
    if tiles.len() != n {
        return Err(format!("{} factors, expected {n}", tiles.len()));
    }
    if tiles.iter().any(|t| *t <= 0) {
        return Err("factors must be positive".into());
    }
    let product = tiles.iter().try_fold(1i64, |a, t| a.checked_mul(*t));
    if product != Some(extent) {
        return Err(format!(
            "factors multiply to {}, the loop extent is {extent}",
            product.map_or("overflow".into(), |p| p.to_string())
        ));
    }
    if tiles[n - 1] > max_innermost {
        return Err(format!(
            "innermost factor {} exceeds max_innermost_factor {max_innermost}",
            tiles[n - 1]
        ));
    }
    Ok(())
}

/// Samples `n` factors of `extent` (outermost first), innermost at most `max_innermost`:
/// each prime factor goes to a uniformly chosen position; draws breaking the innermost
/// limit are retried, then the excess moves outward.
pub fn sample_tile(
    rng: &mut ChaCha8Rng,
    extent: i64,
    n: usize,
    max_innermost: i64,
) -> Result<Vec<i64>> {
    if n == 0 || extent <= 0 || max_innermost <= 0 {
        return Err(ScheduleError::InvalidArgument {
            what: "sample_perfect_tile",
            reason: format!("need n >= 1, a positive extent and max_innermost_factor >= 1 (n={n}, extent={extent}, max={max_innermost})"),
        });
    }
    let primes = prime_factors(extent);
    for _ in 0..64 {
        let mut tiles = vec![1i64; n];
        for p in &primes {
            tiles[rng.gen_range(0..n)] *= p;
        }
        if tiles[n - 1] <= max_innermost {
            return Ok(tiles);
        }
    }
    let mut tiles = vec![1i64; n];
    tiles[0] = extent;
    Ok(tiles)
}

/// The factors nearest `tiles` (a decision made for another extent) that tile `extent`
/// perfectly: from the innermost level outward each keeps the largest divisor of what is
/// left that is at most its factor in `tiles` (the innermost also at most
/// `max_innermost`), and the outermost takes the rest. The inner levels (a thread's
/// registers, the threads of a block) so keep their sizes where the extent allows it.
pub fn fit_tile(extent: i64, max_innermost: i64, tiles: &[i64]) -> Vec<i64> {
    let n = tiles.len();
    let mut out = vec![1i64; n];
    let mut rest = extent.max(1);
    for i in (1..n).rev() {
        let cap = if i == n - 1 {
            tiles[i].min(max_innermost)
        } else {
            tiles[i]
        };
        let f = (1..=cap.min(rest))
            .rev()
            .find(|d| rest % d == 0)
            .unwrap_or(1);
        out[i] = f;
        rest /= f;
    }
    if let Some(first) = out.first_mut() {
        *first = rest;
    }
    out
}

/// [`fit_tile`] for `sample_tile`: the inner factors of `tiles` kept and the outermost
/// covering the rest of `extent` where that wastes at most `max_waste` (and the innermost
/// is within `max_innermost`), else the perfect fit.
pub fn fit_imperfect_tile(
    extent: i64,
    max_innermost: i64,
    max_waste: f64,
    tiles: &[i64],
) -> Vec<i64> {
    let inner: i64 = tiles.iter().skip(1).product();
    if inner > 0 {
        let mut kept = tiles.to_vec();
        kept[0] = (extent + inner - 1) / inner;
        if check_imperfect_tile(extent, tiles.len(), max_innermost, max_waste, &kept).is_ok() {
            return kept;
        }
    }
    fit_tile(extent, max_innermost, tiles)
}

/// The share of `product` padded iterations that fall outside `extent` (0 when the
/// factors are perfect).
pub fn waste(extent: i64, product: i64) -> f64 {
    if product <= extent || product <= 0 {
        0.0
    } else {
        (product - extent) as f64 / product as f64
    }
}

/// Checks a `sample_tile` decision: `n` positive factors multiplying to at least `extent`,
/// wasting at most `max_waste` of the padded iterations, the innermost at most
/// `max_innermost`.
pub fn check_imperfect_tile(
    extent: i64,
    n: usize,
    max_innermost: i64,
    max_waste: f64,
    tiles: &[i64],
) -> std::result::Result<(), String> {
    if tiles.len() != n {
        return Err(format!("{} factors, expected {n}", tiles.len()));
    }
    if tiles.iter().any(|t| *t <= 0) {
        return Err("factors must be positive".into());
    }
    let Some(product) = tiles.iter().try_fold(1i64, |a, t| a.checked_mul(*t)) else {
        return Err("factors overflow".into());
    };
    if product < extent {
        return Err(format!(
            "factors multiply to {product}, less than the loop extent {extent}"
        ));
    }
    let w = waste(extent, product);
    if w > max_waste {
        return Err(format!(
            "factors multiply to {product} for an extent of {extent}: {:.1}% of the iterations are padding, more than max_waste {max_waste}",
            100.0 * w
        ));
    }
    if tiles[n - 1] > max_innermost {
        return Err(format!(
            "innermost factor {} exceeds max_innermost_factor {max_innermost}",
            tiles[n - 1]
        ));
    }
    Ok(())
}

/// Checks `sample_tile`'s arguments.
fn check_imperfect_args(extent: i64, n: usize, max_innermost: i64, max_waste: f64) -> Result<()> {
    if n == 0 || extent <= 0 || max_innermost <= 0 || !(0.0..1.0).contains(&max_waste) {
        return Err(ScheduleError::InvalidArgument {
            what: "sample_tile",
            reason: format!("need n >= 1, a positive extent, max_innermost_factor >= 1 and max_waste in [0, 1) (n={n}, extent={extent}, max={max_innermost}, max_waste={max_waste})"),
        });
    }
    Ok(())
}

/// The share of [`sample_imperfect_tile`]'s draws that are perfect factors.
const PERFECT_SHARE: f64 = 0.25;

/// Tries for [`sample_imperfect_tile`] before it falls back to perfect factors.
const IMPERFECT_TRIES: usize = 64;

/// Samples `n` factors (outermost first) covering `extent`, the innermost at most
/// `max_innermost`, wasting at most `max_waste` of the padded iterations: a
/// [`PERFECT_SHARE`] of the draws are perfect factors ([`sample_tile`]); the others give every inner level a power
/// of two (up to the extent's next power of two, the innermost up to `max_innermost`) and
/// the outermost the ceiling of what is left, retried until the waste is within bounds.
pub fn sample_imperfect_tile(
    rng: &mut ChaCha8Rng,
    extent: i64,
    n: usize,
    max_innermost: i64,
    max_waste: f64,
) -> Result<Vec<i64>> {
    check_imperfect_args(extent, n, max_innermost, max_waste)?;
    if n == 1 || rng.gen::<f64>() < PERFECT_SHARE {
        return sample_tile(rng, extent, n, max_innermost);
    }
    let log2 = |x: i64| 63 - (x.max(1) as u64).leading_zeros() as i64;
    let top = log2(extent) + i64::from(extent & (extent - 1) != 0);
    for _ in 0..IMPERFECT_TRIES {
        let mut tiles = vec![1i64; n];
        for (i, t) in tiles.iter_mut().enumerate().skip(1) {
            let cap = if i == n - 1 {
                top.min(log2(max_innermost))
            } else {
                top
            };
            *t = 1 << rng.gen_range(0..=cap);
        }
        let inner = tiles[1..].iter().try_fold(1i64, |a, t| a.checked_mul(*t));
        let Some(inner) = inner.filter(|p| *p <= extent.saturating_mul(2)) else {
            continue;
        };
        tiles[0] = (extent + inner - 1) / inner;
        if check_imperfect_tile(extent, n, max_innermost, max_waste, &tiles).is_ok() {
            return Ok(tiles);
        }
    }
    sample_tile(rng, extent, n, max_innermost)
}

/// Samples an index by the given probabilities.
pub fn sample_index(rng: &mut ChaCha8Rng, probs: &[f64]) -> Result<usize> {
    let total: f64 = probs.iter().sum();
    if probs.is_empty() || probs.iter().any(|p| !p.is_finite() || *p < 0.0) || total <= 0.0 {
        return Err(ScheduleError::InvalidArgument {
            what: "sample_categorical probs",
            reason: format!("{probs:?} is not a distribution"),
        });
    }
    let mut x = rng.gen::<f64>() * total;
    for (i, p) in probs.iter().enumerate() {
        if x < *p {
            return Ok(i);
        }
        x -= p;
    }
    Ok(probs.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn tiles_are_perfect_and_respect_the_innermost_limit() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for extent in [1, 7, 64, 1000, 1024, 3072] {
            for _ in 0..50 {
                let t = sample_tile(&mut rng, extent, 4, 16).unwrap();
                check_tile(extent, 4, 16, &t).unwrap();
            }
        }
    }

    #[test]
    fn imperfect_tiles_cover_the_extent_within_the_waste_bound() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut imperfect = 0;
        for extent in [1, 7, 263, 311, 523, 1000, 1009, 4096] {
            for _ in 0..100 {
                let t = sample_imperfect_tile(&mut rng, extent, 4, 16, 0.25).unwrap();
                check_imperfect_tile(extent, 4, 16, 0.25, &t).unwrap();
                imperfect += usize::from(t.iter().product::<i64>() != extent);
            }
        }
        assert!(
            imperfect > 200,
            "only {imperfect} of 800 draws are imperfect"
        );
    }

    #[test]
    fn too_much_padding_is_refused() {
        assert_eq!(
            check_imperfect_tile(1009, 2, 64, 0.25, &[8, 128]).unwrap_err(),
            "innermost factor 128 exceeds max_innermost_factor 64"
        );
        assert_eq!(
            check_imperfect_tile(263, 2, 64, 0.25, &[9, 64]).unwrap_err(),
            "factors multiply to 576 for an extent of 263: 54.3% of the iterations are padding, more than max_waste 0.25"
        );
        assert_eq!(
            check_imperfect_tile(263, 2, 64, 0.25, &[4, 64]).unwrap_err(),
            "factors multiply to 256, less than the loop extent 263"
        );
        check_imperfect_tile(263, 2, 64, 0.25, &[5, 64]).unwrap();
    }

    #[test]
    fn bad_decisions_are_explained() {
        assert_eq!(
            check_tile(64, 2, 64, &[8, 4]).unwrap_err(),
            "factors multiply to 32, the loop extent is 64"
        );
        assert_eq!(
            check_tile(64, 2, 4, &[8, 8]).unwrap_err(),
            "innermost factor 8 exceeds max_innermost_factor 4"
        );
        assert_eq!(
            check_tile(64, 3, 64, &[8, 8]).unwrap_err(),
            "2 factors, expected 3"
        );
    }

    #[test]
    fn fitted_tiles_keep_the_inner_factors_that_divide() {
        // 384 = 2^7 * 3: every inner factor divides what is left; the outermost takes 3.
        assert_eq!(fit_tile(384, 16, &[4, 2, 8, 2, 4]), [3, 2, 8, 2, 4]);
        // 40: the innermost 16 becomes 10 (the largest divisor of 40 up to 16), the 4
        // above it divides the 4 left, and nothing is left for the outermost.
        assert_eq!(fit_tile(40, 16, &[2, 4, 16]), [1, 4, 10]);
        // A prime keeps nothing but the outermost.
        assert_eq!(fit_tile(311, 16, &[8, 2, 8, 2]), [311, 1, 1, 1]);
        // The innermost limit holds even where the old factor was larger.
        assert_eq!(fit_tile(64, 4, &[1, 8, 16]), [2, 8, 4]);
        for (extent, t) in [
            (1000, vec![4, 8, 16, 2]),
            (97, vec![2, 3, 4]),
            (1, vec![5, 5]),
        ] {
            check_tile(extent, t.len(), 16, &fit_tile(extent, 16, &t)).unwrap();
        }
    }

    #[test]
    fn fitted_imperfect_tiles_keep_every_inner_factor_within_the_waste_bound() {
        // 1000 over inner tiles of 2 * 8 * 8 = 128: 8 outer tiles, 2.3% wasted.
        assert_eq!(
            fit_imperfect_tile(1000, 16, 0.25, &[4, 2, 8, 8]),
            [8, 2, 8, 8]
        );
        // 100 over inner tiles of 64 wastes 22%: kept under a bound of 25%, and under
        // one of 20% the perfect fit instead.
        assert_eq!(fit_imperfect_tile(100, 16, 0.25, &[1, 8, 8]), [2, 8, 8]);
        let t = fit_imperfect_tile(100, 16, 0.2, &[1, 8, 8]);
        assert_eq!(t, [4, 5, 5]);
        check_imperfect_tile(100, 3, 16, 0.2, &t).unwrap();
    }
}
