//! Stored responses: where `store` and `previous_response_id` plug in. Nothing
//! is stored yet, so `store` (any value) is accepted and the answer says
//! `store: false`, and a continuation of a stored response is refused with a
//! clear message rather than answered without its history.

use crate::server::error::ApiError;

/// Whether the request can be served without stored responses.
pub fn check(store: Option<bool>, previous_response_id: Option<&str>) -> Result<(), ApiError> {
    let _asked_to_store = store;
    match previous_response_id {
        Some(_) => Err(ApiError::invalid_request(
            "`previous_response_id` is not available: this gateway does not store responses yet; send the whole \
             conversation in `input`",
        )),
        None => Ok(()),
    }
}
