//! Which variant of the dialect a call speaks, and the model families whose request
//! rules differ. Kept in one place so `describe`, `encode` and the tests agree on
//! what "reasoning model" means.

/// The provider key for api.openai.com.
pub const OPENAI: &str = "openai";
/// The provider key for any other server that speaks the OpenAI dialect.
pub const COMPATIBLE: &str = "openai-compatible";
/// The provider key for api.openai.com's Responses API (chat only; see `responses`).
pub const RESPONSES: &str = "openai-responses";

/// The two variants this component serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// api.openai.com: the current field names (`max_completion_tokens`,
    /// `developer`), which OpenAI's newest models require.
    OpenAi,
    /// vLLM, llama.cpp, Ollama and the like: the older field names every such
    /// server accepts, and no OpenAI-only features (file parts).
    Compatible,
}

impl Dialect {
    /// The dialect a provider key names; `None` for a key this component does not serve.
    pub fn from_key(key: &str) -> Option<Self> {
        match key {
            OPENAI => Some(Self::OpenAi),
            COMPATIBLE => Some(Self::Compatible),
            _ => None,
        }
    }
}

/// Whether OpenAI itself makes this model (so the `openai` provider claims it):
/// its chat models and its `text-embedding-*` models.
pub fn is_openai_family(wire_id: &str) -> bool {
    let id = wire_id.to_ascii_lowercase();
    id.starts_with("gpt-") || id.starts_with("chatgpt-") || is_o_series(&id) || id.starts_with("text-embedding-")
}

/// Whether the model is an o-series or GPT-5 reasoning model, which takes its
/// instructions in a `developer` message and no `logprobs`. The same rule, word
/// for word, as the host's (`call::policy`), which omits these families'
/// `temperature`; `tests/tests/policy.rs`
/// (`the_developer_role_and_an_omitted_temperature_follow_one_rule`) holds the
/// two to each other on the wire: `gpt-5`, `o1`, `o3`, `o4` and their variants
/// (`family-…`, `family.…`, `family:…`, `family_…`), after any platform prefix,
/// without regard to case; `gpt-5-chat-*` is not one.
pub fn is_reasoning_family(wire_id: &str) -> bool {
    let id = wire_id.rsplit('/').next().unwrap_or(wire_id);
    if member_of(id, "gpt-5-chat") {
        return false;
    }
    ["gpt-5", "o1", "o3", "o4"].into_iter().any(|family| member_of(id, family))
}

/// `id` is `family` itself or a variant of it, compared without regard to ASCII case.
fn member_of(id: &str, family: &str) -> bool {
    let (id, family) = (id.as_bytes(), family.as_bytes());
    id.len() >= family.len()
        && id[..family.len()].eq_ignore_ascii_case(family)
        && matches!(id.get(family.len()), None | Some(b'-' | b'.' | b':' | b'_'))
}

fn is_o_series(id: &str) -> bool {
    ["o1", "o3", "o4"].iter().any(|prefix| id.starts_with(prefix))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(Dialect::from_key("openai"), Some(Dialect::OpenAi));
        assert_eq!(Dialect::from_key("openai-compatible"), Some(Dialect::Compatible));
        assert_eq!(Dialect::from_key("anthropic"), None);
    }

    #[test]
    fn families() {
        for id in [
            "gpt-4.1",
            "gpt-4o-mini",
            "gpt-5",
            "o1-preview",
            "o3-mini",
            "o4-mini",
            "chatgpt-4o-latest",
            "text-embedding-3-small",
            "text-embedding-ada-002",
        ] {
            assert!(is_openai_family(id), "{id}");
        }
        for id in ["claude-sonnet-4-5", "llama3.1:8b", "Qwen/Qwen3-8B", "omni-moderation-latest", "BAAI/bge-m3"] {
            assert!(!is_openai_family(id), "{id}");
        }
    }

    #[test]
    fn reasoning_rules() {
        for id in ["o3", "gpt-5-mini", "gpt-5.1", "O3-MINI", "o1", "openai/o3", "o4-mini-2025-04-16"] {
            assert!(is_reasoning_family(id), "{id}");
        }
        for id in ["gpt-5-chat-latest", "gpt-4.1", "gpt-4o", "o1x", "omni-moderation-latest", "gpt-oss-120b"] {
            assert!(!is_reasoning_family(id), "{id}");
        }
    }
}
