//! Id newtypes, so that fragment ids, segment ids and edge indices do not mix.

use serde::{Deserialize, Serialize};

/// A fragment (or segment) label. Label 0 is background: it is never a node
/// of the region graph and never merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[repr(transparent)]
pub struct FragmentId(pub u64);

impl FragmentId {
    /// The background label.
    pub const BACKGROUND: FragmentId = FragmentId(0);

    /// Whether this is the background label.
    pub fn is_background(self) -> bool {
        self.0 == 0
    }
}

/// The index of an edge in a region graph's edge list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[repr(transparent)]
pub struct EdgeIdx(pub usize);
