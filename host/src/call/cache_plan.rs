//! Prompt-cache breakpoints, planned once per call by the host and rendered by
//! the component (`cache_control`, `cachePoint`): the plan is the same whatever
//! the provider, and a provider never decides which blocks are cached.
//!
//! At most [`MAX_BREAKPOINTS`] per request (Anthropic's limit, the strictest of
//! the explicit-breakpoint providers): the last system block first, when the
//! conversation caches its system prefix (one breakpoint there covers the whole
//! stable prefix: tools and system), then the turns the caller flagged, in
//! order. Flags past the limit are dropped, never an error. An entry whose
//! `prompt_cache` is not `shared` gets none at all: a breakpoint's cache is the
//! provider account's, read by every member (see [`PromptCache`]).

use crate::catalog::PromptCache;
use crate::types::Conversation;

/// Breakpoints per request.
pub const MAX_BREAKPOINTS: usize = 4;

/// Reduces the caller's cache flags to the plan the component renders for an
/// entry whose prompt cache is `mode`.
pub(super) fn plan(conversation: &mut Conversation, mode: PromptCache) {
    if !mode.breakpoints() {
        conversation.cache_system = false;
        conversation.turns.iter_mut().for_each(|turn| turn.cache = false);
        return;
    }
    conversation.cache_system &= !conversation.system.is_empty();
    let mut left = MAX_BREAKPOINTS - usize::from(conversation.cache_system);
    for turn in &mut conversation.turns {
        if turn.cache {
            turn.cache = left > 0;
            left = left.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ContentBlock, Turn};

    fn conversation(system: bool, flagged: &[bool]) -> Conversation {
        let mut conversation = Conversation::user("first");
        conversation.turns.clear();
        conversation.system = if system { vec!["be terse".to_owned()] } else { Vec::new() };
        for (i, &cache) in flagged.iter().enumerate() {
            let mut turn = Turn::user(vec![ContentBlock::Text(format!("turn {i}"))]);
            turn.cache = cache;
            conversation.turns.push(turn);
        }
        conversation
    }

    fn flags(conversation: &Conversation) -> Vec<bool> {
        conversation.turns.iter().map(|turn| turn.cache).collect()
    }

    #[test]
    fn system_first_then_flagged_turns_in_order_up_to_four() {
        let mut c = conversation(true, &[true, false, true, true, true, true]);
        plan(&mut c, PromptCache::Shared);
        assert!(c.cache_system);
        assert_eq!(flags(&c), [true, false, true, true, false, false]);
    }

    #[test]
    fn without_system_caching_four_turns_get_breakpoints() {
        let mut c = conversation(true, &[true, true, true, true, true]);
        c.cache_system = false;
        plan(&mut c, PromptCache::Shared);
        assert_eq!(flags(&c), [true, true, true, true, false]);
    }

    #[test]
    fn no_system_blocks_means_no_system_breakpoint() {
        let mut c = conversation(false, &[true, true, true, true]);
        c.cache_system = true;
        plan(&mut c, PromptCache::Shared);
        assert!(!c.cache_system, "nothing to cache");
        assert_eq!(flags(&c), [true, true, true, true]);
    }

    #[test]
    fn unflagged_turns_stay_unflagged() {
        let mut c = conversation(true, &[false, false]);
        plan(&mut c, PromptCache::Shared);
        assert!(c.cache_system);
        assert_eq!(flags(&c), [false, false]);
    }

    #[test]
    fn only_a_shared_prompt_cache_keeps_any_breakpoint() {
        for mode in [PromptCache::Off, PromptCache::Member] {
            let mut c = conversation(true, &[true, false, true]);
            plan(&mut c, mode);
            assert!(!c.cache_system, "{mode:?}");
            assert_eq!(flags(&c), [false, false, false], "{mode:?}");
        }
    }
}
