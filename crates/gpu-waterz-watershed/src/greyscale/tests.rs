//! The schedules and backends against the synchronous reference, and the
//! reference against a plain serial reading of the definition.

use super::*;
use gpu_waterz_abi::greyscale::{INFINITE, KIND_FREE, PARENT_TERMINAL};
use proptest::prelude::*;
use std::collections::VecDeque;

/// The definition read serially: breadth-first plateau distances, minima
/// by flood fill, labels by following the descent.
fn serial_definition(image: &Image<'_>, config: &Config) -> Vec<u32> {
    assert!(image.markers.is_none(), "the serial reading covers the regional minima");
    let (dims, conn) = (image.dims, config.get_connectivity());
    let n = image.keys.len();
    let kinds = start::kinds(image);
    let level = start::level(image, &kinds);
    let neighbours = |i: usize| -> Vec<usize> {
        let all: Vec<usize> = (0..n).collect();
        (0..abi::DIRECTIONS)
            .filter(|&d| abi::is_neighbour(d, conn))
            .filter_map(|d| {
                let q = value_at(dims, i, &all, usize::MAX, d);
                (q != usize::MAX && level[q] != MASKED).then_some(q)
            })
            .collect()
    };
    let mut distance = vec![INFINITE; n];
    let mut queue = VecDeque::new();
    for i in 0..n {
        if kinds[i] == KIND_FREE && neighbours(i).iter().any(|&q| level[q] < level[i]) {
            distance[i] = 0;
            queue.push_back(i);
        }
    }
    while let Some(i) = queue.pop_front() {
        for q in neighbours(i) {
            if level[q] == level[i] && distance[q] == INFINITE {
                distance[q] = distance[i] + 1;
                queue.push_back(q);
            }
        }
    }
    let mut labels = vec![0u32; n];
    let mut next = 0;
    for i in 0..n {
        if kinds[i] == KIND_FREE && distance[i] == INFINITE && labels[i] == 0 {
            next += 1;
            labels[i] = next;
            let mut stack = vec![i];
            while let Some(p) = stack.pop() {
                for q in neighbours(p) {
                    if level[q] == level[p] && distance[q] == INFINITE && labels[q] == 0 {
                        labels[q] = next;
                        stack.push(q);
                    }
                }
            }
        }
    }
    let parent = |i: usize| {
        let at = |dir| (value_at(dims, i, &level, MASKED, dir), value_at(dims, i, &distance, INFINITE, dir));
        abi::parent_direction(kinds[i], level[i], distance[i], false, conn, at)
    };
    let all: Vec<usize> = (0..n).collect();
    (0..n)
        .map(|i| {
            let mut p = i;
            loop {
                let code = parent(p);
                if code == PARENT_TERMINAL || code == abi::PARENT_NONE {
                    return labels[p];
                }
                p = value_at(dims, p, &all, 0, code as usize);
            }
        })
        .collect()
}

/// What differs between two labellings of the same image: cells whose
/// labels differ after matching each region to the region of the other
/// labelling it overlaps most (labels are compared as partitions).
fn differing_cells(a: &[u32], b: &[u32]) -> u64 {
    use std::collections::HashMap;
    let mut overlap: HashMap<(u32, u32), u64> = HashMap::new();
    for (&x, &y) in a.iter().zip(b) {
        *overlap.entry((x, y)).or_default() += 1;
    }
    let mut best: HashMap<u32, (u64, u32)> = HashMap::new();
    for (&(x, y), &c) in &overlap {
        let e = best.entry(x).or_insert((0, y));
        if c > e.0 || (c == e.0 && y < e.1) {
            *e = (c, y);
        }
    }
    a.iter().zip(b).filter(|(x, y)| best[x].1 != **y).count() as u64
}

fn image<'a>(keys: &'a [u32], dims: (u64, u64, u64)) -> Image<'a> {
    Image { keys, dims: Dims3::new(dims.0, dims.1, dims.2), markers: None, mask: None }
}

#[test]
fn two_basins_split_in_the_middle_of_a_plateau() {
    // 1D: minima at both ends, a plateau of 5 between them.
    let keys = [0, 1, 5, 5, 5, 5, 5, 1, 0];
    let img = image(&keys, (1, 1, 9));
    let s = reference::watershed(&img, &Config::new()).unwrap();
    assert_eq!(s.labels, [1, 1, 1, 1, 1, 2, 2, 2, 2]);
    assert_eq!(s.n_minima, 2);
    let lines = reference::watershed(&img, &Config::new().watershed_line(true)).unwrap();
    // The middle cell descends to the left and has a lower neighbour on the right.
    assert_eq!(lines.labels, [1, 1, 1, 1, 0, 2, 2, 2, 2]);
    let markers = [0, 0, 0, 0, 0, 0, 0, 0, 7];
    let one = Image { markers: Some(&markers), ..img };
    assert_eq!(reference::watershed(&one, &Config::new()).unwrap().labels, [7; 9]);
    let mask = [1, 1, 1, 1, 0, 1, 1, 1, 1];
    let masked = Image { markers: Some(&markers), mask: Some(&mask), ..img };
    assert_eq!(reference::watershed(&masked, &Config::new()).unwrap().labels, [0, 0, 0, 0, 0, 7, 7, 7, 7]);
}

#[test]
fn bad_inputs_are_errors() {
    let keys = [0, 1, 2, MASKED];
    let e = reference::watershed(&image(&keys, (1, 2, 2)), &Config::new()).unwrap_err();
    assert_eq!(e.kind(), GreyscaleErrorKind::Input);
    let keys = [0, 1, 2];
    assert!(cpu::watershed(&image(&keys, (1, 2, 2)), &Config::new()).is_err());
    let keys = [0, 1, 2, 3];
    assert!(cpu::watershed(&image(&keys, (1, 2, 2)), &Config::new().connectivity(4)).is_err());
    let short = [1u32];
    let img = Image { markers: Some(&short), ..image(&keys, (1, 2, 2)) };
    assert!(cpu::watershed(&img, &Config::new()).is_err());
    assert!(Schedule::from_name("fast").is_err());
}

/// Keys, shape, markers, mask, connectivity and watershed lines.
type Case = (Vec<u32>, (u64, u64, u64), Option<Vec<u32>>, Option<Vec<u8>>, u32, bool);

/// Keys with few levels (many plateaus), a shape, markers and a mask.
fn cases() -> impl Strategy<Value = Case> {
    (prop_oneof![Just(1u64), 2u64..12], 1u64..24, 1u64..40, 1u32..6, 1u32..4, any::<bool>(), 0u32..3).prop_flat_map(
        |(z, y, x, levels, conn, lines, extra)| {
            let n = (z * y * x) as usize;
            (
                proptest::collection::vec(0..levels, n),
                Just((z, y, x)),
                proptest::option::of(proptest::collection::vec(prop_oneof![8 => Just(0u32), 1 => 1u32..4], n)),
                proptest::option::weighted(
                    0.3,
                    proptest::collection::vec(prop_oneof![6 => Just(1u8), 1 => Just(0u8)], n),
                ),
                Just(conn),
                Just(lines && extra == 0),
            )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn tiles_equal_the_synchronous_reference((keys, dims, markers, mask, conn, lines) in cases()) {
        let img = Image { markers: markers.as_deref(), mask: mask.as_deref(), ..image(&keys, dims) };
        let config = Config::new().connectivity(conn).watershed_line(lines);
        let want = reference::watershed(&img, &config).unwrap();
        let free = cpu::watershed(&img, &config.schedule(Schedule::ArtifactFree)).unwrap();
        prop_assert_eq!(&free.labels, &want.labels);
        let sync = cpu::watershed(&img, &config.schedule(Schedule::Synchronous)).unwrap();
        prop_assert_eq!(&sync.labels, &want.labels);
        prop_assert_eq!(sync.steps, want.steps);
        prop_assert!(free.steps.total() <= want.steps.total());
        if img.markers.is_none() && img.mask.is_none() && !lines {
            prop_assert_eq!(&want.labels, &serial_definition(&img, &config));
        }
        // Every cell inside the mask gets a label without lines or markers.
        if img.markers.is_none() && !lines {
            let inside = |i: usize| img.mask.is_none_or(|m| m[i] != 0);
            prop_assert!((0..keys.len()).all(|i| (want.labels[i] != 0) == inside(i)));
        }
    }

    #[test]
    fn without_plateaus_the_wavefront_is_exact(seed in any::<u64>(), z in 1u64..10, y in 1u64..30, x in 1u64..30) {
        // Distinct keys: every plateau is one cell, and the first-arrival
        // rule has nothing to get wrong.
        let n = (z * y * x) as usize;
        let mut keys: Vec<u32> = (0..n as u32).collect();
        let mut state = seed | 1;
        for i in (1..n).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            keys.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let img = image(&keys, (z, y, x));
        let want = reference::watershed(&img, &Config::new()).unwrap();
        let fast = cpu::watershed(&img, &Config::new().schedule(Schedule::BlockAsynchronous)).unwrap();
        prop_assert_eq!(fast.labels, want.labels);
    }
}

#[test]
fn the_wavefront_leaves_artifacts_on_a_long_plateau() {
    // One minimum on each side of a wide plateau crossing several tiles;
    // the first-arrival distances are wrong where tiles meet.
    let (y, x) = (40u64, 200u64);
    let keys: Vec<u32> = (0..y * x)
        .map(|i| {
            let (r, c) = (i / x, i % x);
            if (c == 0 && r == 3) || (c == x - 1 && r == y - 5) {
                0
            } else {
                9
            }
        })
        .collect();
    let img = image(&keys, (1, y, x));
    let want = reference::watershed(&img, &Config::new()).unwrap();
    let free = cpu::watershed(&img, &Config::new()).unwrap();
    assert_eq!(free.labels, want.labels);
    let fast = cpu::watershed(&img, &Config::new().schedule(Schedule::BlockAsynchronous)).unwrap();
    let differing = differing_cells(&fast.labels, &want.labels);
    assert!(differing > 0, "the first-arrival wavefront should differ here");
    assert!(fast.steps.total() < want.steps.total() && free.steps.total() < want.steps.total());
}
