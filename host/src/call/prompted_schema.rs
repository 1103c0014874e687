//! A response schema for a model whose provider component cannot carry one
//! natively (Bedrock Converse; a Claude surface without structured output): the
//! schema is described in the system prompt, and the answer passes the same
//! structured-answer gate as a native one — parsed, a schema-echo answer
//! normalized, validated, and corrected in bounded turns (see `call::schema`).
//! The runtime seed's way for Nova: the schema in the prompt, the echo repaired.
//!
//! Whether a call's schema is prompted is the policy's decision (see
//! `call::policy`): the request has a schema, the entry may answer to one
//! (it declares `json_schema`, or declares nothing), and the component carries
//! no native structured output.

use crate::types::{Conversation, ResponseSchema};

/// Adds the schema to the conversation's system prompt. The wire then carries
/// no schema: the component is never handed what it cannot encode.
pub(super) fn describe(conversation: &mut Conversation, schema: &ResponseSchema) {
    conversation.system.push(format!(
        "Answer with only one JSON value that matches the JSON Schema below: no other text, no code fence, no \
         commentary. Schema `{}`:\n{}",
        schema.name, schema.schema_json
    ));
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_the_last_system_block_and_nothing_else_changes() {
        let mut conversation = Conversation::user("Where is the Louvre?");
        conversation.system = vec!["Be terse.".to_owned()];
        let turns = conversation.turns.clone();
        let schema = ResponseSchema { name: "place".into(), schema_json: r#"{"type":"object"}"#.into() };
        describe(&mut conversation, &schema);
        assert_eq!(conversation.system.len(), 2);
        assert_eq!(conversation.system[0], "Be terse.");
        assert!(
            conversation.system[1].contains("Schema `place`:\n{\"type\":\"object\"}"),
            "{}",
            conversation.system[1]
        );
        assert_eq!(conversation.turns, turns);
    }
}
