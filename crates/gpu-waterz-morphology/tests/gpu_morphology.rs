//! The GPU morphology against the CPU path (itself checked against scipy
//! by the Python parity suite): random shapes of rank 1 to 8, batches,
//! every mode, origins, boxes, footprints and weighted structures, every
//! strategy, float32, float64 and uint8; binary steps with masks, borders
//! and iterations.

use gpu_waterz_morphology::gpu::{self, Batch, Iterations, Strategy};
use gpu_waterz_morphology::{grey_dilation, grey_erosion, Element, Footprint, Grey, Mode};
use gpu_waterz_runtime::testing::gpu as test_gpu;
use ndarray::{ArrayD, IxDyn};
use rand::{Rng, SeedableRng};

const MODES: [Mode; 5] = [Mode::Reflect, Mode::Constant, Mode::Nearest, Mode::Mirror, Mode::Wrap];

/// A random element of `rank` axes: a box, a footprint or a structure.
fn random_element(rng: &mut impl Rng, rank: usize, kind: usize) -> (Element<'static>, Vec<usize>) {
    let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=if rank > 3 { 2 } else { 4 })).collect();
    let element = match kind {
        0 => Element::Size(shape.clone()),
        1 => {
            let mut f = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen_bool(0.6));
            f.as_slice_mut().unwrap()[0] = true;
            Element::Footprint(leak(f).view())
        }
        _ => {
            let s = ArrayD::from_shape_fn(IxDyn(&shape), |_| (rng.gen_range(-4..5) as f64) * 0.5);
            let f = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen_bool(0.8));
            let f = if f.iter().any(|&v| v) { Some(leak(f).view()) } else { None };
            Element::Structure { structure: leak(s).view(), footprint: f }
        }
    };
    (element, shape)
}

/// Keeps a test array for the rest of the test (views borrow it).
fn leak<T>(a: ArrayD<T>) -> &'static ArrayD<T> {
    Box::leak(Box::new(a))
}

fn random_origin(rng: &mut impl Rng, shape: &[usize]) -> Vec<isize> {
    shape
        .iter()
        .map(|&n| {
            let half = (n / 2) as isize;
            rng.gen_range(-half..=(n as isize - 1) - half)
        })
        .collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_grey_filters_equal_the_cpu() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
    for case in 0..240 {
        let rank = if case % 10 == 9 { rng.gen_range(5..=8) } else { 1 + case % 4 };
        let shape: Vec<usize> =
            (0..rank).map(|_| rng.gen_range(1..=if rank > 4 { 3 } else { [40, 16, 9, 6][rank - 1] })).collect();
        let items = rng.gen_range(1..=3);
        let (element, element_shape) = random_element(&mut rng, rank, case % 3);
        let origin = random_origin(&mut rng, &element_shape);
        let mode = MODES[case % 5];
        let cval = rng.gen_range(-2..3) as f64 * 0.75;
        let maximum = case % 2 == 1;
        let strategy =
            [Strategy::Auto, Strategy::Gather, Strategy::Separable, Strategy::Tile, Strategy::Box, Strategy::Warp]
                [(case / 3) % 6];
        let spatial: usize = shape.iter().product();
        // Every fourth case holds NaN (about one value in twelve): a NaN
        // never wins on either path.
        let nan = case % 4 == 3;
        let values: Vec<f64> = (0..items * spatial)
            .map(|_| {
                let v = rng.gen_range(-20..20) as f64 * 0.25;
                if nan && rng.gen_ratio(1, 12) {
                    f64::NAN
                } else {
                    v
                }
            })
            .collect();
        let args = Grey { element: element.clone(), mode, cval, origin: origin.clone() };
        let mut want = Vec::new();
        for item in values.chunks(spatial) {
            let view = ArrayD::from_shape_vec(IxDyn(&shape), item.to_vec()).unwrap();
            let out = if maximum { grey_dilation(view.view(), &args) } else { grey_erosion(view.view(), &args) };
            want.extend(out.unwrap().iter().copied());
        }
        let footprint = Footprint::resolve(rank, &element, &origin, maximum).unwrap();
        let batch = Batch { items, shape: &shape };
        let context =
            format!("case {case}: shape {shape:?} x{items}, element {element_shape:?} at {origin:?}, {mode:?}");
        // float64
        let input = g.upload(&values).unwrap();
        let mut output = g.uninit::<f64>(values.len()).unwrap();
        gpu::grey_filter(&g, &input, &mut output, batch, &footprint, mode, cval, maximum, strategy).unwrap();
        let got = g.download(&output).unwrap();
        assert!(same_or_nan(&got, &want), "{context} (f64, {strategy:?}): {got:?} against {want:?}");
        // float32: the CPU's float64 result cast once.
        let values32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let input = g.upload(&values32).unwrap();
        let mut output = g.uninit::<f32>(values.len()).unwrap();
        gpu::grey_filter(&g, &input, &mut output, batch, &footprint, mode, cval, maximum, strategy).unwrap();
        let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
        let got32 = g.download(&output).unwrap();
        assert!(same_or_nan(&got32, &want32), "{context} (f32, {strategy:?}): {got32:?} against {want32:?}");
        // uint8 (bytes of their own, a byte cval): equal to the CPU's
        // float64 result for a flat element; refused with weights.
        let mut byte_rng = rand_chacha::ChaCha8Rng::seed_from_u64(1000 + case as u64);
        let bytes: Vec<u8> = (0..items * spatial).map(|_| byte_rng.gen()).collect();
        let byte_cval = byte_rng.gen::<u8>() as f64;
        let byte_args = Grey { element: element.clone(), mode, cval: byte_cval, origin: origin.clone() };
        let input = g.upload(&bytes).unwrap();
        let mut output = g.uninit::<u8>(bytes.len()).unwrap();
        let result = gpu::grey_filter(&g, &input, &mut output, batch, &footprint, mode, byte_cval, maximum, strategy);
        if !footprint.is_flat() {
            assert!(result.is_err(), "{context} (u8 with weights)");
            continue;
        }
        result.unwrap();
        let mut want8 = Vec::new();
        for item in bytes.chunks(spatial) {
            let view = ArrayD::from_shape_vec(IxDyn(&shape), item.iter().map(|&b| b as f64).collect()).unwrap();
            let out =
                if maximum { grey_dilation(view.view(), &byte_args) } else { grey_erosion(view.view(), &byte_args) };
            want8.extend(out.unwrap().iter().map(|&v| v as u8));
        }
        assert_eq!(g.download(&output).unwrap(), want8, "{context} (u8, {strategy:?})");
        if mode == Mode::Constant {
            for bad in [-1.0, 256.0, 2.5, f64::NAN] {
                let refused =
                    gpu::grey_filter(&g, &input, &mut output, batch, &footprint, mode, bad, maximum, strategy);
                assert!(refused.is_err(), "{context} (u8, cval {bad})");
            }
        }
    }
}

/// Whether two results are equal value for value (and length), a NaN
/// matching a NaN.
fn same_or_nan<T: PartialEq + Copy>(a: &[T], b: &[T]) -> bool {
    #[allow(clippy::eq_op)]
    let nan = |v: T| v != v;
    a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| x == y || (nan(x) && nan(y)))
}

/// A CPU grey-scale operator.
type CpuOperator = fn(ndarray::ArrayViewD<'_, f64>, &Grey<'_>) -> gpu_waterz_morphology::Result<ArrayD<f64>>;

/// Every grey-scale operator of host arrays (`grey_operator_host`: one
/// upload, the filters on the GPU, the differences on the host) against
/// the CPU, item by item of batches: float64 equal to the CPU operators;
/// float32 equal to the CPU's filters cast once, combined in float32 in
/// scipy's order; uint8 likewise, wrapping around, and refused with
/// weights or a cval that is not a byte value in constant mode.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_grey_operators_on_host_arrays_equal_the_cpu() {
    use gpu_waterz_morphology::gpu::{grey_operator_host, GreyOperator};
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(31);
    let names = ["erosion", "dilation", "opening", "closing", "gradient", "laplace", "white_tophat", "black_tophat"];
    for case in 0..64 {
        let rank = 1 + case % 3;
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=[30, 12, 7][rank - 1])).collect();
        let batch: Vec<usize> = (0..case % 3).map(|_| rng.gen_range(1..=2)).collect();
        let (element, element_shape) = random_element(&mut rng, rank, case % 3);
        let origin = random_origin(&mut rng, &element_shape);
        let args = Grey { element, mode: MODES[case % 5], cval: rng.gen_range(-2..3) as f64 * 0.75, origin };
        let full: Vec<usize> = batch.iter().chain(&shape).copied().collect();
        let input = ArrayD::from_shape_fn(IxDyn(&full), |_| rng.gen_range(-20..20) as f64 * 0.25);
        let input32 = input.mapv(|v| v as f32);
        let name = names[case % 8];
        let operator: GreyOperator = name.parse().unwrap();
        let context = format!("case {case}: {name} of {full:?}, element {element_shape:?}, {:?}", args.mode);
        let strategy = Strategy::Auto;
        let got = grey_operator_host(&g, input.view(), batch.len(), &args, operator, strategy).unwrap();
        let got32 = grey_operator_host(&g, input32.view(), batch.len(), &args, operator, strategy).unwrap();
        let spatial: usize = shape.iter().product();
        let values = input.as_slice().unwrap().chunks(spatial);
        let results = got.as_slice().unwrap().chunks(spatial).zip(got32.as_slice().unwrap().chunks(spatial));
        for (item, (result, result32)) in values.zip(results) {
            let item = ArrayD::from_shape_vec(IxDyn(&shape), item.to_vec()).unwrap();
            let cpu = |f: CpuOperator| f(item.view(), &args).unwrap();
            let want = match operator {
                GreyOperator::Erosion => cpu(grey_erosion),
                GreyOperator::Dilation => cpu(grey_dilation),
                GreyOperator::Opening => cpu(gpu_waterz_morphology::grey_opening),
                GreyOperator::Closing => cpu(gpu_waterz_morphology::grey_closing),
                GreyOperator::Gradient => cpu(gpu_waterz_morphology::morphological_gradient),
                GreyOperator::Laplace => cpu(gpu_waterz_morphology::morphological_laplace),
                GreyOperator::WhiteTophat => cpu(gpu_waterz_morphology::white_tophat),
                GreyOperator::BlackTophat => cpu(gpu_waterz_morphology::black_tophat),
            };
            assert_eq!(result, want.as_slice().unwrap(), "{context} (f64)");
            let v = item.mapv(|x| x as f32);
            let (eroded, dilated) = (cpu(grey_erosion).mapv(|x| x as f32), cpu(grey_dilation).mapv(|x| x as f32));
            let opened = cpu(gpu_waterz_morphology::grey_opening).mapv(|x| x as f32);
            let closed = cpu(gpu_waterz_morphology::grey_closing).mapv(|x| x as f32);
            let want32 = match operator {
                GreyOperator::Erosion => eroded,
                GreyOperator::Dilation => dilated,
                GreyOperator::Opening => opened,
                GreyOperator::Closing => closed,
                GreyOperator::Gradient => &dilated - &eroded,
                GreyOperator::Laplace => &(&(&dilated + &eroded) - &v) - &v,
                GreyOperator::WhiteTophat => &v - &opened,
                GreyOperator::BlackTophat => &closed - &v,
            };
            assert_eq!(result32, want32.as_slice().unwrap(), "{context} (f32)");
        }
        // uint8 (flat elements, structures of zeros among them; in
        // constant mode a whole cval from 0 to 255): the CPU's filters cast
        // once, combined wrapping around.
        if !Footprint::resolve(rank, &args.element, &args.origin, false).unwrap().is_flat() {
            let refused =
                grey_operator_host(&g, input.mapv(|v| v as u8).view(), batch.len(), &args, operator, strategy);
            assert!(refused.is_err(), "{context}: uint8 with weights");
            continue;
        }
        let args8 = Grey { cval: 37.0, ..args.clone() };
        let input8 = input.mapv(|v| (v * 12.0 + 127.0) as u8);
        let got8 = grey_operator_host(&g, input8.view(), batch.len(), &args8, operator, strategy).unwrap();
        for (item, result) in input8.as_slice().unwrap().chunks(spatial).zip(got8.as_slice().unwrap().chunks(spatial)) {
            let v = ArrayD::from_shape_vec(IxDyn(&shape), item.to_vec()).unwrap();
            let wide = v.mapv(f64::from);
            let cpu = |f: CpuOperator| f(wide.view(), &args8).unwrap().mapv(|x| x as u8);
            let (eroded, dilated) = (cpu(grey_erosion), cpu(grey_dilation));
            let opened = cpu(gpu_waterz_morphology::grey_opening);
            let closed = cpu(gpu_waterz_morphology::grey_closing);
            let pairs = |a: &ArrayD<u8>, b: &ArrayD<u8>, f: fn(u8, u8) -> u8| {
                ndarray::Zip::from(a).and(b).map_collect(|&x, &y| f(x, y))
            };
            let want8 = match operator {
                GreyOperator::Erosion => eroded,
                GreyOperator::Dilation => dilated,
                GreyOperator::Opening => opened,
                GreyOperator::Closing => closed,
                GreyOperator::Gradient => pairs(&dilated, &eroded, u8::wrapping_sub),
                GreyOperator::Laplace => {
                    let sum = pairs(&pairs(&dilated, &eroded, u8::wrapping_add), &v, u8::wrapping_sub);
                    pairs(&sum, &v, u8::wrapping_sub)
                }
                GreyOperator::WhiteTophat => pairs(&v, &opened, u8::wrapping_sub),
                GreyOperator::BlackTophat => pairs(&closed, &v, u8::wrapping_sub),
            };
            assert_eq!(result, want8.as_slice().unwrap(), "{context} (u8)");
        }
        if args.mode == Mode::Constant {
            for cval in [-1.0, 256.0, 2.5] {
                let bad = Grey { cval, ..args.clone() };
                let refused = grey_operator_host(&g, input8.view(), batch.len(), &bad, operator, strategy);
                assert!(refused.is_err(), "{context}: uint8 with cval {cval}");
            }
        }
    }
    let empty = ArrayD::<f32>::zeros(IxDyn(&[0, 4]));
    let args = Grey { element: Element::Size(vec![3]), mode: Mode::Reflect, cval: 0.0, origin: vec![0] };
    let out = grey_operator_host(&g, empty.view(), 1, &args, GreyOperator::WhiteTophat, Strategy::Auto).unwrap();
    assert_eq!(out.shape(), &[0, 4]);
    assert!(grey_operator_host(&g, empty.view(), 2, &args, GreyOperator::Erosion, Strategy::Auto).is_err());
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_box_passes_and_tiles_equal_the_gather_on_a_volume() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(31);
    let shape = [37usize, 64, 70];
    let values: Vec<f32> = (0..shape.iter().product::<usize>()).map(|_| rng.gen::<f32>()).collect();
    let input = g.upload(&values).unwrap();
    for (size, origin, mode, maximum) in
        [(3usize, 0isize, Mode::Reflect, false), (7, 1, Mode::Wrap, true), (4, -2, Mode::Mirror, true)]
    {
        let element = Element::Size(vec![size; 3]);
        let footprint = Footprint::resolve(3, &element, &[origin; 3], maximum).unwrap();
        let batch = Batch { items: 1, shape: &shape };
        let run = |strategy| {
            let mut out = g.uninit::<f32>(values.len()).unwrap();
            gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, 0.5, maximum, strategy).unwrap();
            g.download(&out).unwrap()
        };
        let gather = run(Strategy::Gather);
        assert_eq!(gather, run(Strategy::Separable), "size {size}, origin {origin}: passes");
        assert_eq!(gather, run(Strategy::Tile), "size {size}, origin {origin}: tiles");
        assert_eq!(gather, run(Strategy::Box), "size {size}, origin {origin}: box");
        assert_eq!(gather, run(Strategy::Warp), "size {size}, origin {origin}: warp");
    }
}

/// The warp kernels against the gather on boxes they take (windows 1 to 3
/// along every axis, shifted by origins) and, in float32, pluses (of rank
/// 3 here), float32 and float64, minimum and maximum, ranks 1 to 3,
/// batches, every mode, extents that leave partial warps and short chunks
/// along z, and NaN in the input. The fixed-window kernels have a test of
/// their own.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_warp_kernel_equals_the_gather() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    for case in 0..80 {
        let rank = 1 + case % 3;
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=[300, 90, 75][rank - 1])).collect();
        let items = rng.gen_range(1..=3);
        let sizes: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=3)).collect();
        let origin = random_origin(&mut rng, &sizes);
        let mode = MODES[case % 5];
        let maximum = case % 2 == 0;
        let spatial: usize = shape.iter().product();
        let values: Vec<f64> = (0..items * spatial)
            .map(|i| if i % 89 == 7 { f64::NAN } else { rng.gen_range(-50..50) as f64 * 0.125 })
            .collect();
        // Every third case a plus (scipy's cross when every window is 3 and
        // the centre in the middle; else shorter arms or off centre): the
        // float32 kernels take it, float64 keeps the plus kernel.
        let centre: Vec<usize> = sizes.iter().map(|&n| rng.gen_range(0..n)).collect();
        let plus = ArrayD::from_shape_fn(IxDyn(&sizes), |i| (0..rank).filter(|&a| i[a] != centre[a]).count() <= 1);
        let (element, what) = if case % 3 == 2 {
            (Element::Footprint(plus.view()), format!("plus {sizes:?} at {centre:?}"))
        } else {
            (Element::Size(sizes.clone()), format!("box {sizes:?}"))
        };
        let footprint = Footprint::resolve(rank, &element, &origin, maximum).unwrap();
        let batch = Batch { items, shape: &shape };
        let context = format!("case {case}: shape {shape:?} x{items}, {what}, origin {origin:?}, {mode:?}");
        let is_box = footprint.is_box();
        assert_eq!(gpu::takes_warp_kernel::<f64>(&g, batch, &footprint).unwrap(), is_box, "{context}");
        assert!(gpu::takes_warp_kernel::<f32>(&g, batch, &footprint).unwrap(), "{context}");
        let input = g.upload(&values).unwrap();
        let run = |strategy| {
            let mut out = g.uninit::<f64>(values.len()).unwrap();
            gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, -1.5, maximum, strategy).unwrap();
            g.download(&out).unwrap()
        };
        let (gather, warp) = (run(Strategy::Gather), run(Strategy::Warp));
        let same = same_or_nan(&gather, &warp);
        assert!(same, "{context} (f64)");
        let values32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let input = g.upload(&values32).unwrap();
        let run = |strategy| {
            let mut out = g.uninit::<f32>(values.len()).unwrap();
            gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, -1.5, maximum, strategy).unwrap();
            g.download(&out).unwrap()
        };
        let (gather, warp) = (run(Strategy::Gather), run(Strategy::Warp));
        let same = same_or_nan(&gather, &warp);
        assert!(same, "{context} (f32)");
    }
    // A box of a window past 3 takes the wide kernels in float32 and uint8
    // (up to 7; past that, and in float64, the box kernel); scipy's cross
    // is taken in float32 only.
    let shape = [20usize, 20, 20];
    let batch = Batch { items: 1, shape: &shape };
    let footprint = Footprint::resolve(3, &Element::Size(vec![4, 3, 3]), &[0, 0, 0], false).unwrap();
    assert!(gpu::takes_warp_kernel::<f32>(&g, batch, &footprint).unwrap());
    assert!(!gpu::takes_warp_kernel::<f64>(&g, batch, &footprint).unwrap());
    let footprint = Footprint::resolve(3, &Element::Size(vec![3, 8, 3]), &[0, 0, 0], false).unwrap();
    assert!(!gpu::takes_warp_kernel::<f32>(&g, batch, &footprint).unwrap());
    assert!(!gpu::takes_warp_kernel::<u8>(&g, batch, &footprint).unwrap());
    let cross = ArrayD::from_shape_fn(IxDyn(&[3, 3, 3]), |i| (0..3).filter(|&a| i[a] != 1).count() <= 1);
    let footprint = Footprint::resolve(3, &Element::Footprint(cross.view()), &[0, 0, 0], false).unwrap();
    assert!(gpu::takes_warp_kernel::<f32>(&g, batch, &footprint).unwrap());
    assert!(!gpu::takes_warp_kernel::<f64>(&g, batch, &footprint).unwrap());
}

/// The fixed-window warp kernels (windows of 3 along y and x, 3 or 1 along
/// z: scipy's `size=3` and its cross, in 3-D and 2-D) against the gather,
/// every combination: float32 and float64, box, centred cross and
/// off-centre plus (float32; float64 pluses take the plus kernel), 2-D and
/// 3-D, minimum and maximum, each with a random mode, origin, batch and
/// extents (partial warps, short chunks along z) and NaN in the input.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_fixed_window_warp_kernels_equal_the_gather() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(43);
    for rank in [2usize, 3] {
        for shape_of_element in ["box", "cross", "plus off centre"] {
            for maximum in [false, true] {
                let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=[90, 75][rank - 2])).collect();
                let items = rng.gen_range(1..=2);
                let sizes = vec![3usize; rank];
                let origin = random_origin(&mut rng, &sizes);
                let mode = MODES[rng.gen_range(0..MODES.len())];
                let centre: Vec<usize> = match shape_of_element {
                    "cross" => vec![1; rank],
                    _ => sizes.iter().map(|&n| rng.gen_range(0..n)).collect(),
                };
                let plus =
                    ArrayD::from_shape_fn(IxDyn(&sizes), |i| (0..rank).filter(|&a| i[a] != centre[a]).count() <= 1);
                let element = if shape_of_element == "box" {
                    Element::Size(sizes.clone())
                } else {
                    Element::Footprint(plus.view())
                };
                let footprint = Footprint::resolve(rank, &element, &origin, maximum).unwrap();
                let batch = Batch { items, shape: &shape };
                let context = format!(
                    "{shape_of_element} at {centre:?}, rank {rank}, maximum {maximum}: shape {shape:?} x{items}, \
                     origin {origin:?}, {mode:?}"
                );
                let spatial: usize = shape.iter().product();
                let values: Vec<f64> = (0..items * spatial)
                    .map(|i| if i % 89 == 7 { f64::NAN } else { rng.gen_range(-50..50) as f64 * 0.125 })
                    .collect();
                assert!(gpu::takes_warp_kernel::<f32>(&g, batch, &footprint).unwrap(), "{context}");
                assert_eq!(
                    gpu::takes_warp_kernel::<f64>(&g, batch, &footprint).unwrap(),
                    shape_of_element == "box",
                    "{context}"
                );
                let input = g.upload(&values).unwrap();
                let run = |strategy| {
                    let mut out = g.uninit::<f64>(values.len()).unwrap();
                    gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, -1.5, maximum, strategy).unwrap();
                    g.download(&out).unwrap()
                };
                assert!(same_or_nan(&run(Strategy::Gather), &run(Strategy::Warp)), "{context} (f64)");
                let values32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
                let input = g.upload(&values32).unwrap();
                let run = |strategy| {
                    let mut out = g.uninit::<f32>(values.len()).unwrap();
                    gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, -1.5, maximum, strategy).unwrap();
                    g.download(&out).unwrap().into_iter().map(f64::from).collect::<Vec<f64>>()
                };
                assert!(same_or_nan(&run(Strategy::Gather), &run(Strategy::Warp)), "{context} (f32)");
                assert!(gpu::takes_warp_kernel::<u8>(&g, batch, &footprint).unwrap(), "{context}");
                let bytes: Vec<u8> = (0..items * spatial).map(|_| rng.gen()).collect();
                let input = g.upload(&bytes).unwrap();
                let run = |strategy| {
                    let mut out = g.uninit::<u8>(bytes.len()).unwrap();
                    gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, 7.0, maximum, strategy).unwrap();
                    g.download(&out).unwrap()
                };
                assert_eq!(run(Strategy::Gather), run(Strategy::Warp), "{context} (u8)");
            }
        }
    }
}

/// The wide warp kernels (boxes of windows 1 to 7, one of them past 3)
/// against the gather: float32 and uint8, minimum and maximum, ranks 1 to
/// 3, batches, every mode, origins, extents that leave partial warps,
/// rows and chunks along z (and shorter than the window), NaN in the
/// input; `Auto` (the wide kernels for rank 3 with short rows, staged
/// passes otherwise) gives the same values; float64 keeps the box kernel.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_wide_warp_kernels_equal_the_gather() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(47);
    for case in 0..60 {
        let rank = 1 + case % 3;
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=[300, 90, 70][rank - 1])).collect();
        let items = rng.gen_range(1..=3);
        let mut sizes: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=7)).collect();
        let wide_axis = rng.gen_range(0..rank);
        sizes[wide_axis] = rng.gen_range(4..=7);
        let origin = random_origin(&mut rng, &sizes);
        let mode = MODES[case % 5];
        let maximum = case % 2 == 0;
        let footprint = Footprint::resolve(rank, &Element::Size(sizes.clone()), &origin, maximum).unwrap();
        let batch = Batch { items, shape: &shape };
        let context = format!("case {case}: shape {shape:?} x{items}, box {sizes:?} at {origin:?}, {mode:?}");
        assert!(gpu::takes_warp_kernel::<f32>(&g, batch, &footprint).unwrap(), "{context}");
        assert!(gpu::takes_warp_kernel::<u8>(&g, batch, &footprint).unwrap(), "{context}");
        assert!(!gpu::takes_warp_kernel::<f64>(&g, batch, &footprint).unwrap(), "{context}");
        let spatial: usize = shape.iter().product();
        let values: Vec<f32> = (0..items * spatial)
            .map(|i| if i % 89 == 7 { f32::NAN } else { rng.gen_range(-50..50) as f32 * 0.125 })
            .collect();
        let filter = Filter { batch, footprint: &footprint, mode, maximum };
        let run = |strategy| filter.run(&g, &values, -1.5, strategy);
        let gather = run(Strategy::Gather);
        assert!(same_or_nan(&gather, &run(Strategy::Warp)), "{context} (f32)");
        assert!(same_or_nan(&gather, &run(Strategy::Auto)), "{context} (f32, auto)");
        let bytes: Vec<u8> = (0..items * spatial).map(|_| rng.gen()).collect();
        assert_eq!(
            filter.run(&g, &bytes, 7.0, Strategy::Gather),
            filter.run(&g, &bytes, 7.0, Strategy::Warp),
            "{context} (u8)"
        );
    }
}

/// One grey-scale filter of a test: the arrays, the element, the mode and
/// minimum or maximum.
struct Filter<'a> {
    batch: Batch<'a>,
    footprint: &'a Footprint,
    mode: Mode,
    maximum: bool,
}

impl Filter<'_> {
    /// The filter of `values` with `cval` under `strategy`, downloaded.
    fn run<T: gpu::GreyValue>(
        &self,
        g: &gpu_waterz_runtime::Gpu,
        values: &[T],
        cval: f64,
        strategy: Strategy,
    ) -> Vec<T> {
        let input = g.upload(values).unwrap();
        let mut out = g.uninit::<T>(values.len()).unwrap();
        let (batch, footprint) = (self.batch, self.footprint);
        gpu::grey_filter(g, &input, &mut out, batch, footprint, self.mode, cval, self.maximum, strategy).unwrap();
        g.download(&out).unwrap()
    }
}

/// The staged separable passes (`Strategy::Separable`) against the
/// gather on boxes of windows 1 to 12 per axis and, on one axis, long
/// windows up to 60 (past the float64 and float32 staging areas along a
/// strided axis, where the pass reads from global memory), shifted by
/// origins: ranks 1 to 5, batches, every mode, lines shorter than a warp
/// and longer than a unit, float32 with NaN (never taken), float64 and
/// uint8, minimum and maximum.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_staged_line_passes_equal_the_gather() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(53);
    for case in 0..80 {
        let rank = 1 + case % 5;
        let longest = [3000, 400, 70, 20, 9][rank - 1];
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=longest)).collect();
        let items = rng.gen_range(1..=3);
        let mut sizes: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=if rank > 3 { 4 } else { 12 })).collect();
        if case % 4 == 0 {
            sizes[rng.gen_range(0..rank)] = rng.gen_range(20..=60);
        }
        let origin = random_origin(&mut rng, &sizes);
        let mode = MODES[case % 5];
        let maximum = case % 2 == 0;
        let footprint = Footprint::resolve(rank, &Element::Size(sizes.clone()), &origin, maximum).unwrap();
        let batch = Batch { items, shape: &shape };
        let context = format!("case {case}: shape {shape:?} x{items}, box {sizes:?} at {origin:?}, {mode:?}");
        let spatial: usize = shape.iter().product();
        let values: Vec<f32> = (0..items * spatial)
            .map(|i| if i % 97 == 5 { f32::NAN } else { rng.gen_range(-50..50) as f32 * 0.125 })
            .collect();
        let filter = Filter { batch, footprint: &footprint, mode, maximum };
        let (gather, passes) =
            (filter.run(&g, &values, -1.5, Strategy::Gather), filter.run(&g, &values, -1.5, Strategy::Separable));
        assert!(same_or_nan(&gather, &passes), "{context} (f32)");
        let wide: Vec<f64> = values.iter().map(|&v| if v.is_nan() { 0.375 } else { v as f64 * 3.0 }).collect();
        assert_eq!(
            filter.run(&g, &wide, 2.25, Strategy::Gather),
            filter.run(&g, &wide, 2.25, Strategy::Separable),
            "{context} (f64)"
        );
        let bytes: Vec<u8> = (0..items * spatial).map(|_| rng.gen()).collect();
        assert_eq!(
            filter.run(&g, &bytes, 9.0, Strategy::Gather),
            filter.run(&g, &bytes, 9.0, Strategy::Separable),
            "{context} (u8)"
        );
    }
}

/// The box kernel against the gather on boxes of every shape it takes
/// (windows 1 to 11 per axis, shifted by origins), ranks 1 to 3, batches,
/// every mode, extents that leave partial blocks and short chunks along z,
/// and NaN in the input (never taken, whatever the order of the passes).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_box_kernel_equals_the_gather() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(37);
    for case in 0..60 {
        let rank = 1 + case % 3;
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=[300, 90, 75][rank - 1])).collect();
        let items = rng.gen_range(1..=3);
        let sizes: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=11)).collect();
        let origin = random_origin(&mut rng, &sizes);
        let mode = MODES[case % 5];
        let maximum = case % 2 == 0;
        let spatial: usize = shape.iter().product();
        let values: Vec<f64> = (0..items * spatial)
            .map(|i| if i % 97 == 5 { f64::NAN } else { rng.gen_range(-50..50) as f64 * 0.125 })
            .collect();
        let footprint = Footprint::resolve(rank, &Element::Size(sizes.clone()), &origin, maximum).unwrap();
        let batch = Batch { items, shape: &shape };
        let input = g.upload(&values).unwrap();
        let run = |strategy| {
            let mut out = g.uninit::<f64>(values.len()).unwrap();
            gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, -1.5, maximum, strategy).unwrap();
            g.download(&out).unwrap()
        };
        let (gather, boxed) = (run(Strategy::Gather), run(Strategy::Box));
        let same = same_or_nan(&gather, &boxed);
        assert!(same, "case {case}: shape {shape:?} x{items}, box {sizes:?} at {origin:?}, {mode:?}");
    }
}

/// One binary step on the CPU: the grey filter of 0/1 values with the
/// border as cval, the input kept outside the mask.
fn cpu_binary_step(
    values: &[f64],
    shape: &[usize],
    element: &Element<'_>,
    origin: &[isize],
    border: bool,
    dilation: bool,
    mask: Option<&[bool]>,
) -> Vec<f64> {
    let args =
        Grey { element: element.clone(), mode: Mode::Constant, cval: border as u8 as f64, origin: origin.to_vec() };
    let view = ArrayD::from_shape_vec(IxDyn(shape), values.to_vec()).unwrap();
    let out = if dilation { grey_dilation(view.view(), &args) } else { grey_erosion(view.view(), &args) }.unwrap();
    out.iter()
        .zip(values)
        .enumerate()
        .map(|(i, (&new, &old))| if mask.is_none_or(|m| m[i]) { new } else { old })
        .collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_binary_filters_equal_the_cpu() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(37);
    for case in 0..160 {
        let rank = if case % 8 == 7 { rng.gen_range(4..=6) } else { 1 + case % 3 };
        let shape: Vec<usize> =
            (0..rank).map(|_| rng.gen_range(1..=if rank > 3 { 4 } else { [50, 20, 10][rank - 1] })).collect();
        let items = rng.gen_range(1..=2);
        let (element, element_shape) = random_element(&mut rng, rank, 1);
        let origin = random_origin(&mut rng, &element_shape);
        let border = rng.gen_bool(0.3);
        let dilation = case % 2 == 0;
        let spatial: usize = shape.iter().product();
        let values: Vec<u8> = (0..items * spatial).map(|_| rng.gen_bool(0.5) as u8).collect();
        let mask: Option<Vec<bool>> = (case % 3 == 0).then(|| (0..values.len()).map(|_| rng.gen_bool(0.7)).collect());
        let footprint = Footprint::resolve(rank, &element, &origin, dilation).unwrap();
        let until_stable = case % 4 == 1 && footprint.has_centre();
        let steps = if until_stable { 0 } else { rng.gen_range(1..=3u64) };
        let mut want = Vec::new();
        for (i, item) in values.chunks(spatial).enumerate() {
            let item_mask = mask.as_ref().map(|m| &m[i * spatial..(i + 1) * spatial]);
            let mut current: Vec<f64> = item.iter().map(|&v| v as f64).collect();
            let mut k = 0;
            loop {
                let next = cpu_binary_step(&current, &shape, &element, &origin, border, dilation, item_mask);
                let same = next == current;
                current = next;
                k += 1;
                if (until_stable && same) || (!until_stable && k == steps) {
                    break;
                }
            }
            want.extend(current.iter().map(|&v| (v != 0.0) as u8));
        }
        let input = g.upload(&values).unwrap();
        let mask_bytes: Option<Vec<u8>> = mask.as_ref().map(|m| m.iter().map(|&b| b as u8).collect());
        let device_mask = mask_bytes.as_ref().map(|m| g.upload(m).unwrap());
        let mut output = g.uninit::<u8>(values.len()).unwrap();
        let iterations = if until_stable { Iterations::UntilStable } else { Iterations::Times(steps) };
        let batch = Batch { items, shape: &shape };
        gpu::binary_filter(
            &g,
            &input,
            &mut output,
            device_mask.as_ref(),
            batch,
            &footprint,
            border,
            dilation,
            iterations,
        )
        .unwrap();
        assert_eq!(
            g.download(&output).unwrap(),
            want,
            "case {case}: shape {shape:?} x{items}, element {element_shape:?} at {origin:?}, {iterations:?}"
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_binary_paths_agree_on_wide_and_deep_elements() {
    // Elements reaching past 32 along x take the byte tiles; rank 4 the
    // global gather; the others rows of bits. Each against the CPU.
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    for (case, (shape, element_shape)) in [
        (vec![5usize, 40, 90], vec![1usize, 3, 70]),
        (vec![33, 17, 64], vec![5, 1, 65]),
        (vec![40, 300], vec![3, 66]),
        (vec![3, 4, 5, 6], vec![2, 3, 1, 2]),
        (vec![70, 20, 100], vec![9, 3, 5]),
        (vec![1000], vec![40]),
    ]
    .into_iter()
    .enumerate()
    {
        let rank = shape.len();
        let mut structure = ArrayD::from_shape_fn(IxDyn(&element_shape), |_| rng.gen_bool(0.5));
        let centre: Vec<usize> = element_shape.iter().map(|&n| n / 2).collect();
        structure[IxDyn(&centre)] = true;
        let element = Element::Footprint(leak(structure).view());
        let origin = vec![0isize; rank];
        let spatial: usize = shape.iter().product();
        let values: Vec<u8> = (0..spatial).map(|_| rng.gen_bool(0.6) as u8).collect();
        let mask: Vec<bool> = (0..spatial).map(|_| rng.gen_bool(0.8)).collect();
        for (dilation, until_stable) in [(false, false), (true, false), (true, true), (false, true)] {
            let footprint = Footprint::resolve(rank, &element, &origin, dilation).unwrap();
            let steps = 2;
            let mut current: Vec<f64> = values.iter().map(|&v| v as f64).collect();
            let mut k = 0;
            loop {
                let next = cpu_binary_step(&current, &shape, &element, &origin, true, dilation, Some(&mask));
                let same = next == current;
                current = next;
                k += 1;
                if (until_stable && same) || (!until_stable && k == steps) {
                    break;
                }
            }
            let want: Vec<u8> = current.iter().map(|&v| (v != 0.0) as u8).collect();
            let input = g.upload(&values).unwrap();
            let mask_bytes: Vec<u8> = mask.iter().map(|&b| b as u8).collect();
            let device_mask = g.upload(&mask_bytes).unwrap();
            let mut output = g.uninit::<u8>(spatial).unwrap();
            let iterations = if until_stable { Iterations::UntilStable } else { Iterations::Times(steps) };
            let batch = Batch { items: 1, shape: &shape };
            gpu::binary_filter(
                &g,
                &input,
                &mut output,
                Some(&device_mask),
                batch,
                &footprint,
                true,
                dilation,
                iterations,
            )
            .unwrap();
            assert_eq!(g.download(&output).unwrap(), want, "case {case}: {shape:?}, {element_shape:?}, {iterations:?}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_morphology_rejects_bad_input() {
    let g = test_gpu();
    let input = g.upload(&[0u8; 8]).unwrap();
    let mut output = g.uninit::<u8>(8).unwrap();
    let ring = ArrayD::from_shape_vec(IxDyn(&[3]), vec![true, false, true]).unwrap();
    let ring = Footprint::resolve(1, &Element::Footprint(ring.view()), &[0], false).unwrap();
    let batch = Batch { items: 1, shape: &[8] };
    // A ring cannot run until stable; zero steps; a rank mismatch; short buffers.
    assert!(
        gpu::binary_filter(&g, &input, &mut output, None, batch, &ring, false, false, Iterations::UntilStable).is_err()
    );
    assert!(
        gpu::binary_filter(&g, &input, &mut output, None, batch, &ring, false, false, Iterations::Times(0)).is_err()
    );
    let wrong_rank = Batch { items: 1, shape: &[2, 4] };
    assert!(gpu::binary_filter(&g, &input, &mut output, None, wrong_rank, &ring, false, false, Iterations::Times(1))
        .is_err());
    let too_many = Batch { items: 2, shape: &[8] };
    assert!(
        gpu::binary_filter(&g, &input, &mut output, None, too_many, &ring, false, false, Iterations::Times(1)).is_err()
    );
    let values = g.upload(&[0f32; 8]).unwrap();
    let mut out = g.uninit::<f32>(4).unwrap();
    let size = Footprint::resolve(1, &Element::Size(vec![3]), &[0], false).unwrap();
    assert!(gpu::grey_filter(&g, &values, &mut out, batch, &size, Mode::Reflect, 0.0, false, Strategy::Auto).is_err());
}

/// Volumes with rows of several words along x, aligned to 4 bytes and not:
/// single steps, and steps until stable that cross many tiles (run in
/// place after the first) with masks and both borders, equal the CPU.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_binary_steps_on_volumes_equal_the_cpu() {
    use gpu_waterz_morphology::{binary_dilation, binary_erosion, generate_binary_structure, Binary};
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    for (case, shape) in
        [vec![4usize, 24, 260], vec![3, 17, 257], vec![2, 3, 1030], vec![5, 40, 132]].into_iter().enumerate()
    {
        let n: usize = shape.iter().product();
        let input = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen_bool(0.02));
        let mask = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.gen_bool(0.75));
        for connectivity in [1, 3] {
            let structure = generate_binary_structure(3, connectivity).unwrap();
            for (dilation, iterations, with_mask, border) in [
                (true, -1, true, false),
                (true, -1, true, true),
                (false, -1, false, true),
                (true, 2, true, false),
                (false, 1, false, false),
            ] {
                let source = if dilation { input.clone() } else { mask.clone() };
                let args = Binary {
                    structure: structure.view(),
                    iterations,
                    mask: with_mask.then(|| mask.view()),
                    border_value: border,
                    origin: vec![0; 3],
                };
                let want =
                    if dilation { binary_dilation(source.view(), &args) } else { binary_erosion(source.view(), &args) }
                        .unwrap();
                let footprint = args.footprint(&shape, dilation).unwrap();
                let bytes: Vec<u8> = source.iter().map(|&v| v as u8).collect();
                let device_input = g.upload(&bytes).unwrap();
                let mask_bytes: Vec<u8> = mask.iter().map(|&v| v as u8).collect();
                let device_mask = with_mask.then(|| g.upload(&mask_bytes).unwrap());
                let mut output = g.uninit::<u8>(n).unwrap();
                let steps = if iterations < 1 { Iterations::UntilStable } else { Iterations::Times(iterations as u64) };
                gpu::binary_filter(
                    &g,
                    &device_input,
                    &mut output,
                    device_mask.as_ref(),
                    Batch { items: 1, shape: &shape },
                    &footprint,
                    border,
                    dilation,
                    steps,
                )
                .unwrap();
                let got: Vec<bool> = g.download(&output).unwrap().iter().map(|&v| v != 0).collect();
                assert_eq!(
                    got,
                    want.iter().copied().collect::<Vec<_>>(),
                    "case {case}: shape {shape:?}, connectivity {connectivity}, dilation {dilation}, {steps:?}, mask {with_mask}, border {border}"
                );
            }
        }
    }
}

/// Pluses (scipy's cross, arms of any length, off centre, moved by an
/// origin) run in the plus kernels (`Strategy::Box`) and equal the gather
/// value for value,
/// float64 with NaN and float32, every mode, minimum and maximum.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_plus_kernel_equals_the_gather() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(43);
    for case in 0..60 {
        let rank = 1 + case % 3;
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=[300, 90, 75][rank - 1])).collect();
        let items = rng.gen_range(1..=2);
        let sizes: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=7)).collect();
        let centre: Vec<usize> = sizes.iter().map(|&n| rng.gen_range(0..n)).collect();
        let plus = ArrayD::from_shape_fn(IxDyn(&sizes), |i| (0..rank).filter(|&a| i[a] != centre[a]).count() <= 1);
        let origin = random_origin(&mut rng, &sizes);
        let mode = MODES[case % 5];
        let maximum = case % 2 == 0;
        let footprint = Footprint::resolve(rank, &Element::Footprint(plus.view()), &origin, maximum).unwrap();
        let spatial: usize = shape.iter().product();
        let batch = Batch { items, shape: &shape };
        // Every such plus fits the kernel's shared memory in float32; in
        // float64 the planes kept along z take twice the bytes, and windows
        // of 5 planes or more go to the tiles (equal as well).
        assert!(gpu::takes_box_kernel(&g, batch, &footprint, 4).unwrap(), "case {case}: {sizes:?} at {centre:?}");
        let float64_taken = gpu::takes_box_kernel(&g, batch, &footprint, 8).unwrap();
        assert_eq!(float64_taken, rank < 3 || sizes[0] <= 4, "case {case}: {sizes:?} in float64");
        let values: Vec<f64> = (0..items * spatial)
            .map(|i| if i % 89 == 3 { f64::NAN } else { rng.gen_range(-50..50) as f64 * 0.125 })
            .collect();
        let input = g.upload(&values).unwrap();
        let run = |strategy| {
            let mut out = g.uninit::<f64>(values.len()).unwrap();
            gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, -1.5, maximum, strategy).unwrap();
            g.download(&out).unwrap()
        };
        let (gather, plus_run) = (run(Strategy::Gather), run(Strategy::Box));
        let same = same_or_nan(&gather, &plus_run);
        assert!(
            same,
            "case {case}: shape {shape:?} x{items}, plus {sizes:?} at {centre:?}, origin {origin:?}, {mode:?}"
        );
        let single: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let input = g.upload(&single).unwrap();
        let run = |strategy| {
            let mut out = g.uninit::<f32>(single.len()).unwrap();
            gpu::grey_filter(&g, &input, &mut out, batch, &footprint, mode, 0.25, maximum, strategy).unwrap();
            g.download(&out).unwrap()
        };
        let (gather, plus_run) = (run(Strategy::Gather), run(Strategy::Box));
        let same = same_or_nan(&gather, &plus_run);
        assert!(same, "case {case} (f32): shape {shape:?} x{items}, plus {sizes:?} at {centre:?}, {mode:?}");
    }
}

/// `binary_fill_holes` with scipy's default structure, by breadth-first
/// search: the background reached from the border through faces stays
/// background; everything else is filled.
fn fill_holes_by_search(input: &[u8], shape: &[usize]) -> Vec<u8> {
    let n = input.len();
    let strides: Vec<usize> = (0..shape.len()).map(|a| shape[a + 1..].iter().product()).collect();
    let coordinate = |i: usize, a: usize| i / strides[a] % shape[a];
    let mut reached = vec![false; n];
    let mut queue: std::collections::VecDeque<usize> = (0..n)
        .filter(|&i| {
            input[i] == 0 && (0..shape.len()).any(|a| coordinate(i, a) == 0 || coordinate(i, a) + 1 == shape[a])
        })
        .collect();
    for &i in &queue {
        reached[i] = true;
    }
    while let Some(i) = queue.pop_front() {
        for a in 0..shape.len() {
            let c = coordinate(i, a);
            for j in [(c > 0).then(|| i - strides[a]), (c + 1 < shape[a]).then(|| i + strides[a])].into_iter().flatten()
            {
                if input[j] == 0 && !reached[j] {
                    reached[j] = true;
                    queue.push_back(j);
                }
            }
        }
    }
    reached.iter().map(|&r| !r as u8).collect()
}

/// `binary_fill_holes` by components (scipy's default structure, rank 1
/// to 3, one or two items, shapes across several components tiles, any
/// non-zero byte true) equals the search above, and on small arrays the
/// CPU function (scipy's dilation until stable); other structures are
/// refused.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn gpu_fill_holes_by_components_equals_the_cpu() {
    let g = test_gpu();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(47);
    for case in 0..45 {
        let rank = 1 + case % 3;
        let shape: Vec<usize> = (0..rank).map(|_| rng.gen_range(1..=[400, 150, 70][rank - 1])).collect();
        let items = rng.gen_range(1..=2);
        let spatial: usize = shape.iter().product();
        let density = [0.45, 0.6, 0.75][case % 3];
        let values: Vec<u8> =
            (0..items * spatial).map(|_| if rng.gen::<f64>() < density { rng.gen_range(1..=3) } else { 0 }).collect();
        let cross = ArrayD::from_shape_fn(IxDyn(&vec![3; rank]), |i| (0..rank).filter(|&a| i[a] != 1).count() <= 1);
        let footprint = Footprint::resolve(rank, &Element::Footprint(cross.view()), &vec![0; rank], true).unwrap();
        assert!(gpu::fill_holes_by_components(&shape, &footprint));
        let input = g.upload(&values).unwrap();
        let mut out = g.uninit::<u8>(values.len()).unwrap();
        gpu::binary_fill_holes_components(&g, &input, &mut out, Batch { items, shape: &shape }, &footprint).unwrap();
        let got = g.download(&out).unwrap();
        for item in 0..items {
            let part = &values[item * spatial..(item + 1) * spatial];
            let want = fill_holes_by_search(part, &shape);
            assert_eq!(&got[item * spatial..(item + 1) * spatial], &want[..], "case {case}: {shape:?} item {item}");
            if spatial <= 4000 {
                let view = ArrayD::from_shape_vec(IxDyn(&shape), part.iter().map(|&v| v != 0).collect()).unwrap();
                let scipy =
                    gpu_waterz_morphology::binary_fill_holes(view.view(), cross.view(), &vec![0; rank]).unwrap();
                let scipy: Vec<u8> = scipy.iter().map(|&v| v as u8).collect();
                assert_eq!(scipy, want, "case {case}: the search against the CPU function");
            }
        }
    }
    // The full 3 × 3 × 3 element and a moved cross are not face connectivity.
    let full = ArrayD::from_elem(IxDyn(&[3, 3, 3]), true);
    let footprint = Footprint::resolve(3, &Element::Footprint(full.view()), &[0, 0, 0], true).unwrap();
    assert!(!gpu::fill_holes_by_components(&[4, 4, 4], &footprint));
    let cross = ArrayD::from_shape_fn(IxDyn(&[3, 3]), |i| i[0] == 1 || i[1] == 1);
    let moved = Footprint::resolve(2, &Element::Footprint(cross.view()), &[1, 0], true).unwrap();
    assert!(!gpu::fill_holes_by_components(&[4, 4], &moved));
    let input = g.upload(&[0u8; 16]).unwrap();
    let mut out = g.uninit::<u8>(16).unwrap();
    assert!(
        gpu::binary_fill_holes_components(&g, &input, &mut out, Batch { items: 1, shape: &[4, 4] }, &moved).is_err()
    );
}
