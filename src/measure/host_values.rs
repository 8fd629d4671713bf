//! Values as a kernel stores them: f32 values (what inputs are drawn as and outputs are
//! checked as) to and from the bytes of a buffer of any dtype, and the NaN (or sentinel)
//! patterns outputs are poisoned with before each run. Both runners use them: the CUDA
//! runner for its uploads and downloads, the CPU runner for its host buffers.

use crate::ir::DType;

/// NaN (or a sentinel) bit patterns written into outputs before each run.
pub const POISON_F32: u32 = 0x7fc0_0000;
pub const POISON_F16: u16 = 0x7e00;
pub const POISON_BF16: u16 = 0x7fc0;
pub const POISON_I32: u32 = 0x8000_0000;

/// f32 values to the stored representation of `dtype` (f16 and bf16 rounded to nearest
/// even, as the interpreter rounds).
pub fn encode(dtype: DType, values: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F32 => values.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        DType::F16 => values
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_bits().to_ne_bytes())
            .collect(),
        DType::BF16 => values
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_bits().to_ne_bytes())
            .collect(),
        DType::I32 => values
            .iter()
            .flat_map(|v| (*v as i32).to_ne_bytes())
            .collect(),
        DType::Bool => values.iter().map(|v| u8::from(*v != 0.0)).collect(),
    }
}

/// The stored representation of `dtype` back to f32.
pub fn decode(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_bits(u16::from_ne_bytes([c[0], c[1]])).to_f32())
            .collect(),
        DType::BF16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_bits(u16::from_ne_bytes([c[0], c[1]])).to_f32())
            .collect(),
        DType::I32 => bytes
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as f32)
            .collect(),
        DType::Bool => bytes.iter().map(|&b| f32::from(u8::from(b != 0))).collect(),
    }
}

/// `numel` elements of `dtype`'s poison pattern, as stored (bool: all ones).
pub fn poison(dtype: DType, numel: usize) -> Vec<u8> {
    let one: Vec<u8> = match dtype {
        DType::F32 => POISON_F32.to_ne_bytes().to_vec(),
        DType::I32 => POISON_I32.to_ne_bytes().to_vec(),
        DType::F16 => POISON_F16.to_ne_bytes().to_vec(),
        DType::BF16 => POISON_BF16.to_ne_bytes().to_vec(),
        DType::Bool => vec![0xff],
    };
    one.repeat(numel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_and_decode_round_trip() {
        let v = [1.0f32, -2.5, 3.0, 0.0];
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::I32] {
            let want: Vec<f32> = if dtype == DType::I32 {
                v.iter().map(|x| (*x as i32) as f32).collect()
            } else {
                v.to_vec()
            };
            assert_eq!(decode(dtype, &encode(dtype, &v)), want, "{dtype:?}");
        }
        assert_eq!(
            decode(DType::Bool, &encode(DType::Bool, &v)),
            vec![1.0, 1.0, 1.0, 0.0]
        );
    }

    #[test]
    fn poison_patterns_are_nan() {
        assert!(f32::from_bits(POISON_F32).is_nan());
        assert!(half::f16::from_bits(POISON_F16).is_nan());
        assert!(half::bf16::from_bits(POISON_BF16).is_nan());
        assert!(f32::from_bits(u32::MAX).is_nan());
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let p = poison(dtype, 3);
            assert_eq!(p.len(), 3 * dtype.bytes(), "{dtype:?}");
            assert!(decode(dtype, &p).iter().all(|x| x.is_nan()), "{dtype:?}");
        }
    }
}
