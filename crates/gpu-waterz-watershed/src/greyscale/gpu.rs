//! The greyscale watershed on the GPU: the same phases and tiles as
//! [`super::cpu`], one thread block per tile (`kernels-rs/src/greyscale.rs`).
//! The launches are this module's only `unsafe` code; each checks the
//! lengths its kernel reads and writes first.

use super::{Config, GreyscaleError, Image, Segmentation, Steps};
use gpu_waterz_abi::greyscale::{
    halo_cells, tile_for_depth, GreyDescendArgs, GreyDistanceInitArgs, GreyLinesArgs, GreyMinimumNumberArgs,
    GreyMinimumRootsArgs, GreyPrepareArgs, GreyRelaxArgs, GreyRule, GREY_TILE_THREADS, MASKED,
};
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::primitives::exclusive_scan;
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, LaunchConfig, StageTimer};

type Result<T> = std::result::Result<T, GreyscaleError>;

/// An image in device memory: keys, optional markers and mask, one value
/// per cell in C order of `dims` (as [`Image`]).
#[derive(Clone, Copy, Debug)]
pub struct DeviceImage<'a> {
    /// Grey levels as keys ([`MASKED`] is reserved).
    pub keys: &'a DeviceBuffer<u32>,
    /// The extent (`z = 1` for 2D).
    pub dims: Dims3,
    /// Markers (0: unmarked), or `None` for the regional minima.
    pub markers: Option<&'a DeviceBuffer<u32>>,
    /// Mask (0: outside), or `None`.
    pub mask: Option<&'a DeviceBuffer<u8>>,
}

/// Labels in device memory, with the steps taken and the stage times.
#[derive(Debug)]
pub struct DeviceSegmentation {
    /// One label per cell, C order.
    pub labels: DeviceBuffer<u32>,
    /// Global steps per phase.
    pub steps: Steps,
    /// Regional minima found (0 with markers).
    pub n_minima: u64,
    /// Seconds per stage (`prepare`, `level`, `distance`, `descend`,
    /// `minimum`, `label`, `lines`), when timing was asked for.
    pub stages: Vec<(&'static str, f64)>,
}

/// The greyscale watershed of a host image on the GPU; labels back on the
/// host.
pub fn watershed(gpu: &Gpu, image: &Image<'_>, config: &Config) -> Result<Segmentation> {
    image.check(config)?;
    let keys = gpu.upload(image.keys)?;
    let markers = image.markers.map(|m| gpu.upload(m)).transpose()?;
    let mask = image.mask.map(|m| gpu.upload(m)).transpose()?;
    let device = DeviceImage { keys: &keys, dims: image.dims, markers: markers.as_ref(), mask: mask.as_ref() };
    let out = watershed_device(gpu, &device, config, false)?;
    Ok(Segmentation { labels: gpu.download(&out.labels)?, steps: out.steps, n_minima: out.n_minima })
}

/// The greyscale watershed of an image in device memory. With `timed`,
/// each stage is timed (synchronizing between stages).
pub fn watershed_device(
    gpu: &Gpu,
    image: &DeviceImage<'_>,
    config: &Config,
    timed: bool,
) -> Result<DeviceSegmentation> {
    let dims = image.dims;
    let n = check(gpu, image, config)?;
    let connectivity = config.get_connectivity();
    let schedule = config.get_schedule();
    let mut timer = StageTimer::new(gpu, timed)?;
    let mut kinds = gpu.uninit::<u8>(n as usize)?;
    let mut level = gpu.uninit::<u32>(n as usize)?;
    let mut reserved = gpu.zeros::<u32>(1)?;
    let args = GreyPrepareArgs {
        n,
        image: image.keys.as_ptr(),
        markers: image.markers.map_or(std::ptr::null(), |m| m.as_ptr()),
        mask: image.mask.map_or(std::ptr::null(), |m| m.as_ptr()),
        kinds: kinds.as_mut_ptr(),
        level: level.as_mut_ptr(),
        reserved: reserved.as_mut_ptr(),
    };
    // SAFETY: every array holds n values (checked by `check`, allocated here).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    if gpu.download_element(&reserved, 0)? != 0 {
        return Err(GreyscaleError::Input(format!("a key is {MASKED:#x}, which is reserved")));
    }
    timer.mark("prepare")?;
    let mut automaton = Automaton::new(gpu, dims, connectivity, schedule.max_local_steps())?;
    let mut steps = Steps::default();
    if image.markers.is_some() {
        steps.level = automaton.relax(GreyRule::Level, image.keys, &kinds, None, None, &mut level)?;
    }
    timer.mark("level")?;
    let mut distance = gpu.uninit::<u32>(n as usize)?;
    let args = GreyDistanceInitArgs {
        dims,
        connectivity,
        kinds: kinds.as_ptr(),
        level: level.as_ptr(),
        distance: distance.as_mut_ptr(),
    };
    // SAFETY: every array holds n values.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    steps.distance =
        automaton.relax(schedule.distance_rule(), image.keys, &kinds, None, Some(&level), &mut distance)?;
    timer.mark("distance")?;
    let mut parents = gpu.uninit::<u8>(n as usize)?;
    let mut labels = gpu.uninit::<u32>(n as usize)?;
    let args = GreyDescendArgs {
        dims,
        connectivity,
        has_markers: image.markers.is_some() as u32,
        kinds: kinds.as_ptr(),
        level: level.as_ptr(),
        distance: distance.as_ptr(),
        markers: image.markers.map_or(std::ptr::null(), |m| m.as_ptr()),
        parents: parents.as_mut_ptr(),
        labels: labels.as_mut_ptr(),
    };
    // SAFETY: every array holds n values; n < u32::MAX (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    timer.mark("descend")?;
    let mut n_minima = 0;
    if image.markers.is_none() {
        steps.minimum = automaton.relax(GreyRule::Minimum, image.keys, &kinds, None, Some(&level), &mut labels)?;
        let mut flags = gpu.uninit::<u32>(n as usize)?;
        let args =
            GreyMinimumRootsArgs { n, parents: parents.as_ptr(), labels: labels.as_ptr(), flags: flags.as_mut_ptr() };
        // SAFETY: every array holds n values.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
        let (offsets, roots) = exclusive_scan(gpu, &flags, n)?;
        drop(flags);
        n_minima = roots;
        let args = GreyMinimumNumberArgs {
            n,
            parents: parents.as_ptr(),
            offsets: offsets.as_ptr(),
            labels: labels.as_mut_ptr(),
        };
        // SAFETY: every array holds n values (the scan's output too).
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    timer.mark("minimum")?;
    steps.label = automaton.relax(GreyRule::Label, image.keys, &kinds, Some(&parents), None, &mut labels)?;
    timer.mark("label")?;
    if config.get_watershed_line() {
        let mut lined = gpu.uninit::<u32>(n as usize)?;
        let args = GreyLinesArgs {
            dims,
            connectivity,
            parents: parents.as_ptr(),
            level: level.as_ptr(),
            distance: distance.as_ptr(),
            labels_in: labels.as_ptr(),
            labels_out: lined.as_mut_ptr(),
        };
        // SAFETY: every array holds n values; the label arrays are distinct.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
        labels = lined;
    }
    timer.mark("lines")?;
    let stages = timer.stages().to_vec();
    Ok(DeviceSegmentation { labels, steps, n_minima, stages })
}

/// Checks the image's buffers, device and size; returns the cell count.
fn check(gpu: &Gpu, image: &DeviceImage<'_>, config: &Config) -> Result<u64> {
    let dims = image.dims;
    let n = dims.checked_voxels().ok_or_else(|| GreyscaleError::Input(format!("the shape {dims:?} overflows")))?;
    if n >= u32::MAX as u64 {
        return Err(GreyscaleError::Input(format!("{n} cells; at most {} are supported", u32::MAX - 1)));
    }
    if !(1..=3).contains(&config.get_connectivity()) {
        return Err(GreyscaleError::Input(format!("connectivity {} (1, 2 or 3)", config.get_connectivity())));
    }
    let input = |what: &str, len: usize| {
        if len as u64 != n {
            return Err(GreyscaleError::Input(format!("{what} hold {len} values for {n} cells")));
        }
        Ok(())
    };
    gpu.check_device(image.keys, "the keys")?;
    input("the keys", image.keys.len())?;
    if let Some(m) = image.markers {
        gpu.check_device(m, "the markers")?;
        input("the markers", m.len())?;
    }
    if let Some(m) = image.mask {
        gpu.check_device(m, "the mask")?;
        input("the mask", m.len())?;
    }
    Ok(n)
}

/// The tile automaton's launch state: tile flags and the step counter.
struct Automaton<'g> {
    gpu: &'g Gpu,
    dims: Dims3,
    connectivity: u32,
    max_local_steps: u32,
    n_tiles: u64,
    active: [DeviceBuffer<u32>; 2],
    changed: DeviceBuffer<u32>,
    step: u32,
}

impl<'g> Automaton<'g> {
    fn new(gpu: &'g Gpu, dims: Dims3, connectivity: u32, max_local_steps: u32) -> Result<Self> {
        let tile = tile_for_depth(dims.z);
        let n_tiles =
            dims.z.div_ceil(tile[0] as u64) * dims.y.div_ceil(tile[1] as u64) * dims.x.div_ceil(tile[2] as u64);
        if n_tiles > i32::MAX as u64 {
            return Err(GreyscaleError::Input(format!("{n_tiles} tiles exceed the GPU's grid")));
        }
        let active = [gpu.uninit(n_tiles.max(1) as usize)?, gpu.uninit(n_tiles.max(1) as usize)?];
        Ok(Self { gpu, dims, connectivity, max_local_steps, n_tiles, active, changed: gpu.zeros(1)?, step: 0 })
    }

    /// Global steps of `rule` until one changes nothing; the steps taken.
    /// `state` ends holding the fixed point.
    fn relax(
        &mut self,
        rule: GreyRule,
        keys: &DeviceBuffer<u32>,
        kinds: &DeviceBuffer<u8>,
        parents: Option<&DeviceBuffer<u8>>,
        companion: Option<&DeviceBuffer<u32>>,
        state: &mut DeviceBuffer<u32>,
    ) -> Result<u64> {
        let gpu = self.gpu;
        let n = self.dims.z * self.dims.y * self.dims.x;
        const K: &str = "grey_relax";
        check_len(K, "image", keys, n)?;
        check_len(K, "kinds", kinds, n)?;
        check_len(K, "state", state, n)?;
        if let Some(p) = parents {
            check_len(K, "parents", p, n)?;
        }
        if let Some(c) = companion {
            check_len(K, "companion", c, n)?;
        }
        if rule == GreyRule::Label && parents.is_none() {
            return Err(GreyscaleError::Input("the label rule needs the parents".into()));
        }
        // The two buffers agree on every tile a step skips (see the CPU
        // version): start them equal, all tiles active.
        let mut other = gpu.duplicate(state)?;
        gpu.memset_bytes(&mut self.active[0], 1)?;
        let tile = tile_for_depth(self.dims.z);
        let config = LaunchConfig {
            blocks: self.n_tiles as u32,
            threads: GREY_TILE_THREADS,
            shared_bytes: (2 * halo_cells(tile) + 1) * 4,
        };
        let mut steps = 0;
        loop {
            steps += 1;
            self.step = self.step.wrapping_add(1).max(1);
            gpu.memset_zero(&mut self.active[1])?;
            let [active_in, active_out] = &mut self.active;
            let args = GreyRelaxArgs {
                dims: self.dims,
                rule: rule as u32,
                connectivity: self.connectivity,
                step: self.step,
                max_local_steps: self.max_local_steps,
                image: keys.as_ptr(),
                kinds: kinds.as_ptr(),
                parents: parents.map_or(std::ptr::null(), |p| p.as_ptr()),
                companion: companion.map_or(std::ptr::null(), |c| c.as_ptr()),
                state_in: state.as_ptr(),
                state_out: other.as_mut_ptr(),
                active_in: active_in.as_ptr(),
                active_out: active_out.as_mut_ptr(),
                changed: self.changed.as_mut_ptr(),
            };
            // SAFETY: every per-cell array holds n values (checked above),
            // the tile flags one per tile, `state` and `other` are distinct
            // buffers; one block of GREY_TILE_THREADS per tile with the
            // shared memory the kernel documents.
            unsafe { gpu.launch(config, args) }?;
            if gpu.download_element(&self.changed, 0)? != self.step {
                return Ok(steps);
            }
            std::mem::swap(state, &mut other);
            self.active.swap(0, 1);
        }
    }
}
