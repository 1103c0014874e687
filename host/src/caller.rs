//! Who a call is for: the identity every layer may read (the record, the
//! budgets, the picker) without depending on how it was established (the
//! gateway's key ring in [`crate::identity`], or a library caller's word).

/// The caller of one call. The gateway fills it from the key it checked; a
/// service embedding the library passes its own member id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    /// The key's id (never its token); `None` for a library caller without a key.
    pub key_id: Option<String>,
    pub member: String,
    pub team: Option<String>,
}
