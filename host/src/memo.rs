//! Values worked out once per key, for per-call work that depends only on one
//! of the few inputs a configuration names (an endpoint URL's parse): a
//! read lock on the path every call takes, a write lock the first time a key
//! is seen. Bounded: a map that reaches its limit starts over, so inputs that
//! keep changing cost a fresh computation, never unbounded memory.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

#[derive(Debug)]
pub(crate) struct Memo<V> {
    values: RwLock<HashMap<String, V>>,
    limit: usize,
}

impl<V: Clone> Memo<V> {
    pub fn new(limit: usize) -> Self {
        Self { values: RwLock::default(), limit }
    }

    /// The value kept for `key`, or `make`'s, kept from now on.
    pub fn get_or_insert_with(&self, key: &str, make: impl FnOnce() -> V) -> V {
        if let Some(known) = self.values.read().unwrap_or_else(PoisonError::into_inner).get(key) {
            return known.clone();
        }
        let value = make();
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        if values.len() >= self.limit {
            values.clear();
        }
        values.insert(key.to_owned(), value.clone());
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_made_once_per_key_and_the_map_starts_over_at_its_limit() {
        let memo = Memo::new(2);
        let made = std::cell::Cell::new(0);
        let make = |value: u32| {
            made.set(made.get() + 1);
            value
        };
        assert_eq!(memo.get_or_insert_with("a", || make(1)), 1);
        assert_eq!(memo.get_or_insert_with("a", || make(9)), 1, "kept");
        assert_eq!(memo.get_or_insert_with("b", || make(2)), 2);
        assert_eq!(made.get(), 2);
        assert_eq!(memo.get_or_insert_with("c", || make(3)), 3, "the full map started over");
        assert_eq!(memo.get_or_insert_with("a", || make(4)), 4, "so `a` is made again");
        assert_eq!(made.get(), 4);
    }
}
