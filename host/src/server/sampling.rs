//! Sampling fields both ingress dialects read the same way, so a request means
//! the same on either route.
//!
//! `top_p`: WIT 0.1.0's call parameters have no field for it, so Weir cannot
//! send it. Both routes parse it into the request (a value outside 0.0–1.0 is
//! malformed on either); the call's policy then accepts 1.0 (a no-op), drops it
//! on an entry whose sampling is fixed, and refuses anything else naming the
//! model (see `call::policy`).

use super::error::ApiError;

/// A caller's `top_p`, checked for range.
pub(super) fn top_p(given: Option<f32>) -> Result<Option<f32>, ApiError> {
    match given {
        Some(top_p) if !(0.0..=1.0).contains(&top_p) => {
            Err(ApiError::invalid_request(format!("`top_p` {top_p} is outside 0.0–1.0")))
        }
        _ => Ok(given),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_p_in_range_is_kept_and_out_of_range_is_refused() {
        for given in [None, Some(0.0), Some(0.9), Some(1.0)] {
            assert_eq!(top_p(given).unwrap(), given);
        }
        for bad in [1.5, -0.1, f32::NAN] {
            assert!(top_p(Some(bad)).unwrap_err().message.contains("outside 0.0–1.0"), "{bad}");
        }
    }
}
