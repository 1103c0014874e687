//! Admission: what a call may consume before it goes upstream. Today that is the
//! output reserve; the token buckets and throttle build on the same number.

mod budget;

pub use budget::output_reserve;
