//! The synchronous automaton over the whole image: the definition, and the
//! oracle every other schedule and backend is tested against. Each global
//! step computes every cell's new state from its neighbours' previous
//! states (a Jacobi sweep), until a step changes nothing.

use super::{run_on_host, value_at, Cells, Config, GreyscaleError, Image, Schedule, Segmentation};
use gpu_waterz_abi::greyscale::{self as abi, GreyRule, MASKED};
use rayon::prelude::*;

/// The greyscale watershed by the synchronous automaton (the schedule in
/// `config` is ignored: this is the synchronous one).
pub fn watershed(image: &Image<'_>, config: &Config) -> Result<Segmentation, GreyscaleError> {
    let config = config.schedule(Schedule::Synchronous);
    run_on_host(image, &config, &mut relax_synchronously)
}

/// Jacobi sweeps of `rule` until nothing changes; the number of sweeps.
fn relax_synchronously(cells: Cells<'_>, rule: GreyRule, companion: Option<&[u32]>, state: &mut Vec<u32>) -> u64 {
    let sentinel = abi::state_sentinel(rule);
    let mut steps = 0;
    loop {
        steps += 1;
        let old: &[u32] = state;
        let new: Vec<u32> = (0..old.len())
            .into_par_iter()
            .map(|i| {
                let own_companion = companion.map_or(MASKED, |c| c[i]);
                let at = |dir| {
                    let c = companion.map_or(MASKED, |c| value_at(cells.dims, i, c, MASKED, dir));
                    (c, value_at(cells.dims, i, old, sentinel, dir))
                };
                abi::relax(
                    rule,
                    cells.kinds[i],
                    cells.keys[i],
                    cells.parent(i),
                    own_companion,
                    old[i],
                    cells.connectivity,
                    at,
                )
            })
            .collect();
        if new == *state {
            return steps;
        }
        *state = new;
    }
}
