//! The dimension adapter: every vector leaves at the deployment's one width,
//! L2-normalized, whatever width the model answered in.
//!
//! A wider vector is *folded*: truncated to the width and renormalized, which
//! keeps its leading direction (valid for Matryoshka-trained models such as
//! OpenAI's `text-embedding-3-*`, Titan V2 and Cohere v4). A narrower one is
//! zero-padded (cosine similarity between padded vectors is unchanged). A
//! vector of exactly the width is only normalized.

/// Why a native vector cannot be adapted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WidthError {
    #[error("the vector is empty")]
    Empty,
    #[error("the vector holds a value that is not a finite number")]
    NotFinite,
    #[error("the vector has no length to normalize (all of its kept values are zero)")]
    Zero,
}

/// `native` at `width` values, unit length (see the module doc).
pub fn adapt(mut native: Vec<f32>, width: usize) -> Result<Vec<f32>, WidthError> {
    if native.is_empty() {
        return Err(WidthError::Empty);
    }
    if native.iter().any(|value| !value.is_finite()) {
        return Err(WidthError::NotFinite);
    }
    native.truncate(width);
    normalize(&mut native)?;
    native.resize(width, 0.0);
    // A folded vector would otherwise keep its native allocation (twice the
    // memory of a 3072 → 1536 fold) for as long as the answer lives.
    native.shrink_to_fit();
    Ok(native)
}

/// Scales `vector` to unit L2 length, summing in f64 so a 3 072-wide vector
/// loses no precision to the sum.
fn normalize(vector: &mut [f32]) -> Result<(), WidthError> {
    let norm = vector.iter().map(|value| f64::from(*value) * f64::from(*value)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return Err(WidthError::Zero);
    }
    for value in vector.iter_mut() {
        // Within f32's range: each value is at most the norm in magnitude.
        *value = (f64::from(*value) / norm) as f32;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn norm(vector: &[f32]) -> f64 {
        vector.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>().sqrt()
    }

    fn cosine(a: &[f32], b: &[f32]) -> f64 {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
        dot / (norm(a) * norm(b))
    }

    /// Vectors with at least one clearly non-zero value.
    fn vector(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<f32>> {
        prop::collection::vec(-10.0f32..10.0, len).prop_filter("not all zero", |v| norm(v) > 1e-3)
    }

    proptest! {
        #[test]
        fn every_vector_leaves_at_the_width_with_unit_norm(native in vector(1..300), width in 1usize..400) {
            prop_assume!(norm(&native[..native.len().min(width)]) > 1e-3);
            let adapted = adapt(native, width).unwrap();
            prop_assert_eq!(adapted.len(), width);
            prop_assert!((norm(&adapted) - 1.0).abs() < 1e-5, "norm {}", norm(&adapted));
        }

        #[test]
        fn a_fold_keeps_the_leading_direction(native in vector(20..300), cut in 1usize..20) {
            prop_assume!(norm(&native[..cut]) > 1e-3);
            let adapted = adapt(native.clone(), cut).unwrap();
            prop_assert!((cosine(&adapted, &native[..cut]) - 1.0).abs() < 1e-5);
        }

        #[test]
        fn a_pad_adds_zeros_after_the_normalized_vector(native in vector(1..100), extra in 1usize..100) {
            let width = native.len() + extra;
            let adapted = adapt(native.clone(), width).unwrap();
            prop_assert!(adapted[native.len()..].iter().all(|v| *v == 0.0));
            prop_assert!((cosine(&adapted[..native.len()], &native) - 1.0).abs() < 1e-5);
        }

        #[test]
        fn the_native_width_is_only_normalized(native in vector(1..300)) {
            let n = norm(&native);
            let adapted = adapt(native.clone(), native.len()).unwrap();
            for (a, v) in adapted.iter().zip(&native) {
                prop_assert!((f64::from(*a) - f64::from(*v) / n).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn degenerate_vectors_are_refused_not_coerced() {
        assert_eq!(adapt(Vec::new(), 4), Err(WidthError::Empty));
        assert_eq!(adapt(vec![1.0, f32::NAN], 4), Err(WidthError::NotFinite));
        assert_eq!(adapt(vec![0.0, 0.0, 5.0], 2), Err(WidthError::Zero), "the kept part is all zeros");
        assert_eq!(adapt(vec![3.0, 4.0], 2), Ok(vec![0.6, 0.8]));
    }
}
