//! The call's effort, decided once: the request's own, else its key's default,
//! else its member's, else the config's `default_effort` (`medium` when unset),
//! so interactive and delegated calls behave alike. A caller may turn it off.
//! How it reaches the wire is the entry's declaration (`reasoning`), applied in
//! the gates' call parameters.

use crate::Weir;
use crate::chat::ChatRequest;
use crate::types::Effort;

/// The effort in force for `request`; `None` when the caller turned it off.
pub(super) fn effective(weir: &Weir, request: &ChatRequest) -> Option<Effort> {
    if request.reasoning_off {
        return None;
    }
    if let Some(effort) = request.reasoning_effort {
        return Some(effort);
    }
    let config = weir.config();
    let Some(caller) = request.caller.as_ref() else { return Some(config.default_effort()) };
    let key_default = caller.key_id.as_deref().and_then(|id| weir.keys().get(id).and_then(|key| key.default_effort));
    let member_default = || config.members.get(&caller.member).and_then(|member| member.default_effort);
    Some(key_default.or_else(member_default).unwrap_or_else(|| config.default_effort()))
}
