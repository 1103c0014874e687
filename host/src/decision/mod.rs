//! Decisions: typed questions about a state, answered with a probability over
//! the outcomes the caller declared (`docs/decision-wire.md`). Every decision
//! endpoint speaks one wire, so its vocabulary and its codec live here, in the
//! host, not in a component.
//!
//! What exists: the wire's types, the strict check of a request
//! ([`DecisionRequest::validate`]) and of an endpoint's answer against it
//! ([`check_answer`]: never repaired), and the answer read back by the shape
//! asked ([`Decision`]). No call path, route or backend uses them yet (issue 18).

mod wire;

pub use wire::{
    AnsweredQuestion, Decision, DecisionAnswer, DecisionRequest, DecisionUsage, Distribution, Malformed, NoulAnswer,
    Question, SUM_TOLERANCE, State, check_answer,
};

#[cfg(test)]
mod tests;
