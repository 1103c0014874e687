//! Which lane a call's demand queues in.

/// Interactive demands (chat, query embedding, rerank) are served before bulk
/// ones (ingestion); bulk leaves the model's `interactive_share` free.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Lane {
    #[default]
    Interactive,
    Bulk,
}

impl Lane {
    /// `interactive` or `bulk` (a header's or a config's word).
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "interactive" => Some(Self::Interactive),
            "bulk" => Some(Self::Bulk),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Bulk => "bulk",
        }
    }
}
