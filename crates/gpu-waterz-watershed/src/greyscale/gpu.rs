//! The greyscale watershed on the GPU: the same phases and tiles as
//! [`super::cpu`], one thread block per tile (`kernels-rs/src/greyscale.rs`;
//! the launches are in the private `launch` module).

use super::launch::{self, RelaxStep};
use super::{Config, GreyscaleError, Image, Segmentation, Steps};
use gpu_waterz_abi::greyscale::{GreyRule, MASKED};
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::primitives::exclusive_scan;
use gpu_waterz_runtime::{DeviceBuffer, Gpu, StageTimer};

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
    // Reserved keys are found on the device (`grey_prepare`), not here.
    if image.check_extent(config)? == 0 {
        return Ok(Segmentation { labels: Vec::new(), steps: Steps::default(), n_minima: 0 });
    }
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
    if n == 0 {
        return Err(GreyscaleError::Input("the image is empty".into()));
    }
    let connectivity = config.get_connectivity();
    let schedule = config.get_schedule();
    let mut timer = StageTimer::new(gpu, timed)?;
    let mut kinds = gpu.uninit::<u8>(n as usize)?;
    let mut level = gpu.uninit::<u32>(n as usize)?;
    let mut reserved = gpu.zeros::<u32>(1)?;
    launch::prepare(gpu, n, image.keys, image.markers, image.mask, &mut kinds, &mut level, &mut reserved)?;
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
    launch::distance_init(gpu, dims, connectivity, &kinds, &level, &mut distance)?;
    steps.distance =
        automaton.relax(schedule.distance_rule(), image.keys, &kinds, None, Some(&level), &mut distance)?;
    timer.mark("distance")?;
    let mut parents = gpu.uninit::<u8>(n as usize)?;
    let mut labels = gpu.uninit::<u32>(n as usize)?;
    launch::descend(gpu, dims, connectivity, &kinds, &level, &distance, image.markers, &mut parents, &mut labels)?;
    timer.mark("descend")?;
    let mut n_minima = 0;
    if image.markers.is_none() {
        steps.minimum = automaton.relax(GreyRule::Minimum, image.keys, &kinds, None, Some(&level), &mut labels)?;
        let mut flags = gpu.uninit::<u32>(n as usize)?;
        launch::minimum_roots(gpu, n, &parents, &labels, &mut flags)?;
        let (offsets, roots) = exclusive_scan(gpu, &flags, n)?;
        drop(flags);
        n_minima = roots;
        launch::minimum_number(gpu, n, &parents, &offsets, &mut labels)?;
    }
    timer.mark("minimum")?;
    steps.label = automaton.relax(GreyRule::Label, image.keys, &kinds, Some(&parents), None, &mut labels)?;
    timer.mark("label")?;
    if config.get_watershed_line() {
        let mut lined = gpu.uninit::<u32>(n as usize)?;
        launch::lines(gpu, dims, connectivity, &parents, &level, &distance, &labels, &mut lined)?;
        labels = lined;
    }
    timer.mark("lines")?;
    let stages = timer.stages().to_vec();
    Ok(DeviceSegmentation { labels, steps, n_minima, stages })
}

/// Checks the image's buffers, device and size; returns the cell count.
fn check(gpu: &Gpu, image: &DeviceImage<'_>, config: &Config) -> Result<u64> {
    let n = super::check_extent(
        image.dims,
        config,
        image.keys.len(),
        image.markers.map(|m| m.len()),
        image.mask.map(|m| m.len()),
    )?;
    gpu.check_device(image.keys, "the keys")?;
    if let Some(m) = image.markers {
        gpu.check_device(m, "the markers")?;
    }
    if let Some(m) = image.mask {
        gpu.check_device(m, "the mask")?;
    }
    Ok(n)
}

/// The tile automaton's launch state: tile flags and the step counter.
struct Automaton<'g> {
    gpu: &'g Gpu,
    dims: Dims3,
    connectivity: u32,
    max_local_steps: u32,
    active: [DeviceBuffer<u32>; 2],
    changed: DeviceBuffer<u32>,
    step: u32,
}

impl<'g> Automaton<'g> {
    fn new(gpu: &'g Gpu, dims: Dims3, connectivity: u32, max_local_steps: u32) -> Result<Self> {
        let n_tiles = launch::tile_count(dims);
        let active = [gpu.uninit(n_tiles.max(1) as usize)?, gpu.uninit(n_tiles.max(1) as usize)?];
        Ok(Self { gpu, dims, connectivity, max_local_steps, active, changed: gpu.zeros(1)?, step: 0 })
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
        // The two buffers agree on every tile a step skips (see the CPU
        // version): start them equal, all tiles active.
        let mut other = gpu.duplicate(state)?;
        gpu.memset_bytes(&mut self.active[0], 1)?;
        let mut steps = 0;
        loop {
            steps += 1;
            self.step = self.step.wrapping_add(1).max(1);
            gpu.memset_zero(&mut self.active[1])?;
            let [active_in, active_out] = &mut self.active;
            let step = RelaxStep {
                dims: self.dims,
                rule,
                connectivity: self.connectivity,
                step: self.step,
                max_local_steps: self.max_local_steps,
                keys,
                kinds,
                parents,
                companion,
            };
            launch::relax_step(gpu, &step, state, &mut other, active_in, active_out, &mut self.changed)?;
            if gpu.download_element(&self.changed, 0)? != self.step {
                return Ok(steps);
            }
            std::mem::swap(state, &mut other);
            self.active.swap(0, 1);
        }
    }
}
