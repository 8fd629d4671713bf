//! `sample_perfect_tile` and `sample_categorical`: the random decisions of a design space.
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
}
