//! Scans of large slices on rayon's threads that the crates' input checks
//! share.

use rayon::prelude::*;

/// The first index of `values` where `bad` holds, or `None`: whether any
/// does is asked on every thread, and only then is the first one looked
/// for, serially. (rayon's `position_first` took about 20 times as long as
/// a serial scan over 67 M labels, and the checks almost never find one.)
pub fn first_position<T: Sync>(values: &[T], bad: impl Fn(&T) -> bool + Sync) -> Option<usize> {
    first_index(values.len(), |k| bad(&values[k]))
}

/// [`first_position`] over the indices `0..len`: the first `k` for which
/// `bad(k)` holds, or `None` (for values held in several columns).
pub fn first_index(len: usize, bad: impl Fn(usize) -> bool + Sync) -> Option<usize> {
    if (0..len).into_par_iter().any(&bad) {
        (0..len).position(bad)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::first_position;

    #[test]
    fn the_first_match_or_none() {
        let values: Vec<u32> = (0..200_000).map(|i| if i % 70_001 == 70_000 { 9 } else { 1 }).collect();
        assert_eq!(first_position(&values, |&v| v == 9), Some(70_000));
        assert_eq!(first_position(&values, |&v| v == 7), None);
        assert_eq!(first_position(&[] as &[u32], |_| true), None);
        assert_eq!(super::first_index(200_000, |k| k % 70_001 == 70_000), Some(70_000));
        assert_eq!(super::first_index(0, |_| true), None);
    }
}
