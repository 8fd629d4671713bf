//! The baseline: ordinary least squares of the label on standardized features, fitted by
//! `linfa-linear`. Features constant in the training set are left out of the fit (they
//! would make the system singular) and weigh nothing in prediction.

use linfa::traits::Fit;
use linfa::DatasetBase;
use linfa_linear::LinearRegression;
use ndarray::{Array1, Array2};
use serde::{Deserialize, Serialize};

/// A fitted linear model over standardized features.
/// The ridge penalty per sample (on standardized features).
const RIDGE: f64 = 1e-4;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    /// Per feature: its training mean and standard deviation (0 for a left-out feature).
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    /// Per feature: its coefficient (0 for a left-out feature).
    pub coef: Vec<f64>,
    pub intercept: f64,
}

impl Linear {
    /// Fits `labels` on `features` (one row per sample, all of one length).
    pub fn fit(features: &[Vec<f32>], labels: &[f64]) -> Result<Linear, String> {
        let n = features.len();
        let d = features.first().map_or(0, Vec::len);
        if n == 0 || labels.len() != n {
            return Err(format!("{n} samples for {} labels", labels.len()));
        }
        let mut mean = vec![0.0; d];
        let mut std = vec![0.0; d];
        for f in 0..d {
            let col = features.iter().map(|r| f64::from(r[f]));
            let m = col.clone().sum::<f64>() / n as f64;
            let var = col.map(|v| (v - m) * (v - m)).sum::<f64>() / n as f64;
            mean[f] = m;
            std[f] = if var > 1e-12 && var.is_finite() {
                var.sqrt()
            } else {
                0.0
            };
        }
        let kept: Vec<usize> = (0..d).filter(|f| std[*f] > 0.0).collect();
        let mut coef = vec![0.0; d];
        if kept.is_empty() {
            let intercept = labels.iter().sum::<f64>() / n as f64;
            return Ok(Linear {
                mean,
                std,
                coef,
                intercept,
            });
        }
        // A small ridge penalty keeps collinear features (many of the feature set move
        // together) from making the normal equations singular: one extra row per kept
        // feature, sqrt(lambda) in its column and the mean label as target, which is ridge
        // regression solved by linfa's ordinary least squares.
        let k = kept.len();
        let ridge = (RIDGE * n as f64).sqrt();
        let label_mean = labels.iter().sum::<f64>() / n as f64;
        let x = Array2::from_shape_fn((n + k, k), |(i, j)| {
            if i < n {
                let f = kept[j];
                (f64::from(features[i][f]) - mean[f]) / std[f]
            } else if i - n == j {
                ridge
            } else {
                0.0
            }
        });
        let y: Vec<f64> = labels
            .iter()
            .copied()
            .chain(std::iter::repeat_n(label_mean, k))
            .collect();
        let ds = DatasetBase::new(x, Array1::from(y));
        let fitted = LinearRegression::new()
            .fit(&ds)
            .map_err(|e| format!("least squares: {e}"))?;
        for (j, f) in kept.iter().enumerate() {
            coef[*f] = fitted.params()[j];
        }
        Ok(Linear {
            mean,
            std,
            coef,
            intercept: fitted.intercept(),
        })
    }

    /// The prediction for one feature vector.
    pub fn predict_one(&self, x: &[f32]) -> f64 {
        self.intercept
            + self
                .coef
                .iter()
                .enumerate()
                .filter(|(f, c)| **c != 0.0 && self.std[*f] > 0.0)
                .map(|(f, c)| {
                    let v = f64::from(x.get(f).copied().unwrap_or(0.0));
                    let v = if v.is_finite() { v } else { 0.0 };
                    c * (v - self.mean[f]) / self.std[f]
                })
                .sum::<f64>()
    }

    /// Whether every number is finite and the vectors agree in length.
    pub fn is_well_formed(&self) -> bool {
        let d = self.coef.len();
        self.mean.len() == d
            && self.std.len() == d
            && self.intercept.is_finite()
            && self
                .mean
                .iter()
                .chain(&self.std)
                .chain(&self.coef)
                .all(|v| v.is_finite())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_linear_function_and_ignores_constant_features() {
        let features: Vec<Vec<f32>> = (0..50)
            .map(|i| vec![i as f32, 7.0, (i % 5) as f32])
            .collect();
        let labels: Vec<f64> = features
            .iter()
            .map(|r| 2.0 * f64::from(r[0]) - f64::from(r[2]) + 3.0)
            .collect();
        let m = Linear::fit(&features, &labels).unwrap();
        assert_eq!(m.coef[1], 0.0);
        let p = m.predict_one(&[10.0, 7.0, 4.0]);
        assert!((p - 19.0).abs() < 0.05, "{p}");
    }

    #[test]
    fn collinear_features_still_fit() {
        // Feature 1 is twice feature 0: plain least squares is singular.
        let features: Vec<Vec<f32>> = (0..30)
            .map(|i| vec![i as f32, 2.0 * i as f32, (i % 3) as f32])
            .collect();
        let labels: Vec<f64> = features.iter().map(|r| f64::from(r[0]) + 1.0).collect();
        let m = Linear::fit(&features, &labels).unwrap();
        let p = m.predict_one(&[10.0, 20.0, 1.0]);
        assert!((p - 11.0).abs() < 0.1, "{p}");
    }
}
