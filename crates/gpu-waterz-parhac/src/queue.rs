//! waterz's edge queues, replayed exactly: the order in which equal scores
//! leave the queue decides which of two tied merges happens first.

/// A queue of edge indices by score, cheapest first.
pub trait EdgeQueue {
    /// Adds `edge` with `score`.
    fn push(&mut self, edge: usize, score: f64);
    /// The cheapest edge, if any.
    fn top(&self) -> Option<usize>;
    /// Removes the cheapest edge.
    fn pop(&mut self);
}

/// `std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>>` as
/// libstdc++ implements it (`__push_heap`, `__adjust_heap`), so that entries
/// with equal scores come out in the same order as in stock waterz.
#[derive(Clone, Debug, Default)]
pub struct BinaryHeapQueue {
    entries: Vec<(usize, f64)>,
}

impl BinaryHeapQueue {
    /// `std::greater`: whether `a` sorts after `b` (has the larger score).
    #[inline]
    fn greater(a: &(usize, f64), b: &(usize, f64)) -> bool {
        a.1 > b.1
    }

    /// libstdc++'s `__push_heap`: moves `value` up from `hole` towards `top`.
    fn push_heap(&mut self, mut hole: usize, top: usize, value: (usize, f64)) {
        while hole > top {
            let parent = (hole - 1) / 2;
            if !Self::greater(&self.entries[parent], &value) {
                break;
            }
            self.entries[hole] = self.entries[parent];
            hole = parent;
        }
        self.entries[hole] = value;
    }

    /// libstdc++'s `__adjust_heap` over the first `len` entries.
    fn adjust_heap(&mut self, mut hole: usize, len: usize, value: (usize, f64)) {
        let top = hole;
        let mut second = hole;
        while len > 0 && second < (len - 1) / 2 {
            second = 2 * (second + 1);
            if Self::greater(&self.entries[second], &self.entries[second - 1]) {
                second -= 1;
            }
            self.entries[hole] = self.entries[second];
            hole = second;
        }
        if len & 1 == 0 && len >= 2 && second == (len - 2) / 2 {
            second = 2 * (second + 1);
            self.entries[hole] = self.entries[second - 1];
            hole = second - 1;
        }
        self.push_heap(hole, top, value);
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl EdgeQueue for BinaryHeapQueue {
    fn push(&mut self, edge: usize, score: f64) {
        self.entries.push((edge, score));
        let hole = self.entries.len() - 1;
        self.push_heap(hole, 0, (edge, score));
    }

    fn top(&self) -> Option<usize> {
        self.entries.first().map(|e| e.0)
    }

    fn pop(&mut self) {
        let n = self.entries.len();
        if n > 1 {
            let last = n - 1;
            let value = self.entries[last];
            self.entries[last] = self.entries[0];
            self.adjust_heap(0, last, value);
        }
        self.entries.pop();
    }
}

/// waterz's `BinQueue<T, S, N>`: scores in `[0, 1]` discretized into `N`
/// FIFO bins (scores outside go to the first or last bin).
#[derive(Clone, Debug)]
pub struct BinQueue {
    bins: Vec<std::collections::VecDeque<usize>>,
    min_bin: Option<usize>,
}

/// waterz's `discretize<int>(value, levels)` for a float32 value.
pub fn discretize(value: f32, levels: u32) -> usize {
    if !(value > 0.0) {
        return 0;
    }
    if value >= 1.0 {
        return levels as usize - 1;
    }
    ((value * levels as f32) as usize).min(levels as usize - 1)
}

impl BinQueue {
    /// A queue of `n_bins` bins (at least 1).
    pub fn new(n_bins: u32) -> Self {
        Self { bins: vec![Default::default(); n_bins.max(1) as usize], min_bin: None }
    }
}

impl EdgeQueue for BinQueue {
    fn push(&mut self, edge: usize, score: f64) {
        let i = discretize(score as f32, self.bins.len() as u32);
        self.bins[i].push_back(edge);
        self.min_bin = Some(self.min_bin.map_or(i, |m| m.min(i)));
    }

    fn top(&self) -> Option<usize> {
        self.min_bin.and_then(|m| self.bins[m].front().copied())
    }

    fn pop(&mut self) {
        let Some(mut m) = self.min_bin else { return };
        self.bins[m].pop_front();
        if self.bins[m].is_empty() {
            while m < self.bins.len() {
                if !self.bins[m].is_empty() {
                    self.min_bin = Some(m);
                    return;
                }
                m += 1;
            }
            self.min_bin = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The heap pops in non-decreasing score order, whatever the ties.
        #[test]
        fn heap_pops_sorted(scores in proptest::collection::vec(0u8..6, 0..200)) {
            let mut q = BinaryHeapQueue::default();
            for (i, &s) in scores.iter().enumerate() {
                q.push(i, s as f64);
            }
            let mut last = f64::NEG_INFINITY;
            let mut seen = 0;
            while let Some(e) = q.top() {
                let s = scores[e] as f64;
                prop_assert!(s >= last);
                last = s;
                q.pop();
                seen += 1;
            }
            prop_assert_eq!(seen, scores.len());
        }
    }

    #[test]
    fn heap_breaks_ties_like_libstdcxx() {
        // The orders below were printed by the same pushes and pops on a
        // `std::priority_queue<E, std::vector<E>, std::greater<E>>` built
        // with g++ 12 (libstdc++).
        let mut q = BinaryHeapQueue::default();
        for i in 0..5 {
            q.push(i, 0.5);
        }
        let mut order = Vec::new();
        while let Some(e) = q.top() {
            order.push(e);
            q.pop();
        }
        assert_eq!(order, vec![0, 2, 4, 1, 3]);

        let scores = [3.0, 1.0, 2.0, 1.0, 3.0, 2.0, 1.0, 0.0, 3.0, 1.0, 2.0, 2.0, 0.0];
        let mut q = BinaryHeapQueue::default();
        let mut order = Vec::new();
        for (i, &s) in scores.iter().enumerate() {
            q.push(i, s);
            if i % 4 == 3 {
                order.push(q.top().unwrap());
                q.pop();
            }
        }
        while let Some(e) = q.top() {
            order.push(e);
            q.pop();
        }
        assert_eq!(order, vec![1, 7, 3, 12, 6, 9, 2, 11, 10, 5, 8, 0, 4]);
    }

    #[test]
    fn bin_queue_is_fifo_within_a_bin() {
        let mut q = BinQueue::new(4);
        q.push(7, 0.9);
        q.push(1, 0.3);
        q.push(2, 0.26);
        q.push(3, -1.0);
        let mut order = Vec::new();
        while let Some(e) = q.top() {
            order.push(e);
            q.pop();
        }
        assert_eq!(order, vec![3, 1, 2, 7]);
        assert_eq!(discretize(f32::NAN, 4), 0);
        assert_eq!(discretize(1.0, 4), 3);
    }
}
