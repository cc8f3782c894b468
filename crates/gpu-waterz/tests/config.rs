//! The pipeline's configuration and backend choice, without a GPU: values
//! out of range and settings a backend cannot honour are errors of the
//! right kind; `Backend::Auto` says which backend it took and why.

use gpu_waterz::core::synthetic::{cell_affinities, cell_labels};
use gpu_waterz::{AffinityGraph, Agglomeration, Arithmetic, Backend, BackendKind, Config, ErrorKind, ScoringFunction};

fn volume() -> gpu_waterz::ndarray::Array4<f32> {
    cell_affinities(3, &cell_labels(3, (6, 20, 20), 8), 0.3)
}

fn kind(affs: &gpu_waterz::ndarray::Array4<f32>, config: Config) -> ErrorKind {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    Agglomeration::new(&graph, config).unwrap_err().kind()
}

#[test]
fn values_out_of_range_are_invalid_input() {
    let affs = volume();
    assert_eq!(kind(&affs, Config::new(&[0.5, f64::NAN]).backend(Backend::Cpu)), ErrorKind::InvalidInput);
    assert_eq!(kind(&affs, Config::new(&[0.5]).epsilon(-0.5).backend(Backend::Cpu)), ErrorKind::InvalidInput);
    assert_eq!(kind(&affs, Config::new(&[0.5]).watershed_thresholds(0.9, 0.1)), ErrorKind::InvalidInput);
    assert_eq!(kind(&affs, Config::new(&[0.5]).discretize_queue(1 << 20)), ErrorKind::InvalidInput);
    let wrong_shape = gpu_waterz::ndarray::Array3::<u64>::zeros((6, 20, 21));
    let cpu = Config::new(&[0.5]).backend(Backend::Cpu);
    assert_eq!(kind(&affs, cpu.clone().ground_truth(wrong_shape.clone())), ErrorKind::InvalidInput);
    assert_eq!(kind(&affs, cpu.fragments(wrong_shape)), ErrorKind::InvalidInput);
}

#[test]
fn the_cpu_backend_refuses_epsilon_instead_of_ignoring_it() {
    let affs = volume();
    assert_eq!(kind(&affs, Config::new(&[0.5]).epsilon(0.1).backend(Backend::Cpu)), ErrorKind::Unsupported);
    // Settings neither backend runs together.
    let both = Config::new(&[0.5]).epsilon(0.1).scoring(ScoringFunction::MaxAffinity);
    assert_eq!(kind(&affs, both), ErrorKind::Unsupported);
}

#[test]
fn auto_says_which_backend_it_took_and_why() {
    let affs = volume();
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    // A setting only the CPU runs: Auto takes the CPU, with the reason.
    let run = Agglomeration::new(&graph, Config::new(&[0.5]).arithmetic(Arithmetic::Waterz)).unwrap();
    assert_eq!(run.backend(), BackendKind::Cpu);
    assert!(run.backend_note().unwrap().contains("float32"), "{:?}", run.backend_note());
    // Otherwise the GPU when there is one, else the CPU, saying so.
    let run = Agglomeration::new(&graph, Config::new(&[0.5])).unwrap();
    match gpu_waterz::Gpu::new(0) {
        Ok(_) => assert_eq!(run.backend(), BackendKind::Gpu),
        Err(_) => {
            assert_eq!(run.backend(), BackendKind::Cpu);
            assert!(run.backend_note().unwrap().contains("no usable GPU"), "{:?}", run.backend_note());
            assert!(run.gpu().is_none() && run.gpu_stats().is_none());
        }
    }
}

#[test]
fn the_cpu_backend_has_no_device_results() {
    let affs = volume();
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let mut run = Agglomeration::new(&graph, Config::new(&[0.5]).backend(Backend::Cpu)).unwrap();
    assert_eq!(run.next_threshold_device().unwrap_err().kind(), ErrorKind::Unsupported);
    // The pipeline is still usable, and is an iterator of results.
    let results: Vec<_> = run.map(|r| r.unwrap()).collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].threshold, 0.5);
}

#[test]
fn merge_history_and_graph_come_in_the_callers_ids() {
    let affs = volume();
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let labels = cell_labels(3, (6, 20, 20), 8).mapv(|l| if l == 0 { 0 } else { 500 + u64::from(l) });
    let config =
        Config::new(&[0.3, 0.9]).fragments(labels).merge_history(true).region_graph(true).backend(Backend::Cpu);
    for result in Agglomeration::new(&graph, config).unwrap() {
        let result = result.unwrap();
        assert!(result.segmentation.iter().all(|&l| l == 0 || l > 500));
        assert!(result.merge_history.unwrap().iter().all(|m| m.a > 500 && m.b > 500 && m.c > 500));
        assert!(result.region_graph.unwrap().iter().all(|e| e.u > 500 && e.v > 500));
    }
}

/// waterz's input semantics: any finite threshold, and finite affinities
/// outside [0, 1], which waterz's arithmetic takes as they are and exact
/// statistics clamp, saying so once.
#[test]
fn any_finite_threshold_and_affinities_outside_0_1() {
    let mut affs = volume();
    // waterz's README example: thresholds far above every score merge
    // everything connected; one below every score merges nothing.
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let run = Agglomeration::new(&graph, Config::new(&[-1.0, 0.0, 100.0, 200.0]).backend(Backend::Cpu)).unwrap();
    let segs: Vec<_> = run.map(|r| r.unwrap().segmentation).collect();
    assert_eq!(segs.len(), 4);
    assert_eq!(segs[0], segs[1], "nothing merges below every score");
    assert_eq!(segs[2], segs[3], "everything connected merged by 100");
    assert!(segs[2].iter().filter(|&&l| l != 0).all(|&l| l == segs[2].iter().copied().find(|&l| l != 0).unwrap()));
    // Lossy-compressed inputs decode slightly above 1.
    affs[[0, 3, 5, 5]] = 1.0000315;
    affs[[1, 3, 5, 6]] = 1.0001676;
    affs[[2, 2, 2, 2]] = -0.002;
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    assert_eq!(graph.n_outside_unit_interval(), 3);
    let waterz_order = Agglomeration::new(&graph, Config::new(&[0.5]).backend(Backend::Cpu)).unwrap();
    assert!(waterz_order.warnings().is_empty(), "waterz's arithmetic takes them as they are");
    let exact = Config::new(&[0.5]).arithmetic(Arithmetic::Exact).backend(Backend::Cpu);
    let exact = Agglomeration::new(&graph, exact).unwrap();
    assert_eq!(exact.warnings().len(), 1);
    assert!(exact.warnings()[0].starts_with("3 affinities lie outside [0, 1]"), "{:?}", exact.warnings());
    // NaN and infinity stay errors.
    affs[[2, 2, 2, 2]] = f32::INFINITY;
    assert!(AffinityGraph::from_f32(affs.view()).unwrap_err().to_string().contains("infinite"));
}

/// The fragments come back in the caller's ids: the configured ones as
/// given, the watershed's as the pieces every segmentation is made of.
#[test]
fn fragments_come_back_in_the_callers_ids() {
    let affs = volume();
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let run = Agglomeration::new(&graph, Config::new(&[0.5]).backend(Backend::Cpu)).unwrap();
    let fragments = run.fragments().unwrap();
    let seg = run.into_iter().next().unwrap().unwrap().segmentation;
    let mut segment_of = std::collections::HashMap::new();
    for (&f, &s) in fragments.iter().zip(seg.iter()) {
        assert_eq!(*segment_of.entry(f).or_insert(s), s, "fragment {f} lies in one segment");
    }
    assert!(segment_of.len() > 1);
    let given = fragments.mapv(|f| if f == 0 { 0 } else { 1000 + 3 * f });
    let run = Agglomeration::new(&graph, Config::new(&[0.5]).fragments(given.clone()).backend(Backend::Cpu)).unwrap();
    assert_eq!(run.fragments().unwrap(), given);
}

#[test]
fn count_segments_counts_distinct_non_zero_labels() {
    let mut a = gpu_waterz::ndarray::Array3::<u64>::zeros((3, 4, 5));
    assert_eq!(gpu_waterz::count_segments(&a.view()), 0);
    a[[0, 0, 1]] = 7;
    a[[0, 0, 2]] = 7;
    a[[2, 3, 4]] = 7;
    a[[1, 2, 2]] = 1 << 40;
    a[[1, 2, 3]] = 3;
    assert_eq!(gpu_waterz::count_segments(&a.view()), 3);
}

/// Borrowed fragments give what configured ones give; both at once is an
/// error; with borrowed fragments the watershed's thresholds are not read.
#[test]
fn borrowed_fragments_equal_configured_ones() {
    let affs = volume();
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let labels = cell_labels(5, (6, 20, 20), 8).mapv(|l| if l == 0 { 0 } else { 900 + 5 * u64::from(l) });
    let config = Config::new(&[0.3, 0.9]).merge_history(true).backend(Backend::Cpu);
    let configured: Vec<_> =
        Agglomeration::new(&graph, config.clone().fragments(labels.clone())).unwrap().map(|r| r.unwrap()).collect();
    let borrowed: Vec<_> =
        Agglomeration::with_fragments(&graph, labels.view(), config.clone()).unwrap().map(|r| r.unwrap()).collect();
    for (a, b) in configured.iter().zip(&borrowed) {
        assert_eq!(a.segmentation, b.segmentation);
        assert_eq!(a.merge_history, b.merge_history);
    }
    let twice = Agglomeration::with_fragments(&graph, labels.view(), config.clone().fragments(labels.clone()));
    assert_eq!(twice.err().map(|e| e.kind()), Some(ErrorKind::InvalidInput));
    let odd_watershed = config.watershed_thresholds(0.9, 0.1);
    assert!(Agglomeration::with_fragments(&graph, labels.view(), odd_watershed).is_ok());
    let wrong = ndarray::Array3::<u64>::zeros((2, 2, 2));
    let e = Agglomeration::with_fragments(&graph, wrong.view(), Config::new(&[0.5]).backend(Backend::Cpu)).err();
    assert_eq!(e.map(|e| e.kind()), Some(ErrorKind::InvalidInput));
}

/// A borrowed ground truth, uint32 or uint64, gives the metrics a
/// configured one gives; both at once is an error, as is a wrong shape.
#[test]
fn a_borrowed_ground_truth_equals_a_configured_one() {
    use gpu_waterz::LabelsView;
    let affs = volume();
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let gt = cell_labels(7, (6, 20, 20), 6).mapv(u64::from);
    let gt32 = gt.mapv(|l| l as u32);
    let config = Config::new(&[0.3, 0.9]).backend(Backend::Cpu);
    let configured: Vec<_> =
        Agglomeration::new(&graph, config.clone().ground_truth(gt.clone())).unwrap().map(|r| r.unwrap()).collect();
    for view in [LabelsView::U64(gt.view()), LabelsView::U32(gt32.view())] {
        let borrowed: Vec<_> =
            Agglomeration::with_inputs(&graph, None, Some(view), config.clone()).unwrap().map(|r| r.unwrap()).collect();
        for (a, b) in configured.iter().zip(&borrowed) {
            assert!(a.metrics.is_some());
            assert_eq!(a.metrics, b.metrics);
            assert_eq!(a.segmentation, b.segmentation);
        }
    }
    let twice =
        Agglomeration::with_inputs(&graph, None, Some(LabelsView::U32(gt32.view())), config.clone().ground_truth(gt));
    assert_eq!(twice.err().map(|e| e.kind()), Some(ErrorKind::InvalidInput));
    let wrong = ndarray::Array3::<u32>::zeros((2, 2, 2));
    let e = Agglomeration::with_inputs(&graph, None, Some(LabelsView::U32(wrong.view())), config).err();
    assert_eq!(e.map(|e| e.kind()), Some(ErrorKind::InvalidInput));
}

/// Relabelling one volume in place, waterz's way, gives every threshold's
/// segmentation, metrics and merges as new volumes do: with the watershed's
/// fragments (a table by label) and with user fragments of huge ids (a
/// search); afterwards the run has no per-voxel copy, so new volumes are an
/// error, as are a volume of another shape and labels of no fragment.
#[test]
fn relabelling_in_place_equals_new_volumes() {
    let affs = volume();
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let gt = cell_labels(7, (6, 20, 20), 5).mapv(u64::from);
    let huge = cell_labels(5, (6, 20, 20), 8).mapv(|l| if l == 0 { 0 } else { (1 << 50) + 11 * u64::from(l) });
    let config = Config::new(&[0.2, 0.5, 0.5001, 0.9]).merge_history(true).ground_truth(gt).backend(Backend::Cpu);
    for fragments in [None, Some(huge)] {
        let with = |c: Config| match &fragments {
            Some(f) => c.fragments(f.clone()),
            None => c,
        };
        let arrays: Vec<_> = Agglomeration::new(&graph, with(config.clone())).unwrap().map(|r| r.unwrap()).collect();
        let mut run = Agglomeration::new(&graph, with(config.clone())).unwrap();
        let mut volume = ndarray::Array3::<u64>::from_elem((6, 20, 20), 12345);
        for expected in &arrays {
            let r = run.next_threshold_in_place(volume.view_mut()).unwrap().unwrap();
            assert_eq!(volume, expected.segmentation, "threshold {}", r.threshold);
            assert_eq!(r.threshold, expected.threshold);
            assert_eq!(r.metrics, expected.metrics);
            assert_eq!(r.merge_history, expected.merge_history);
        }
        assert!(run.next_threshold_in_place(volume.view_mut()).unwrap().is_none());
        assert_eq!(run.next_threshold().unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(run.fragments().unwrap_err().kind(), ErrorKind::InvalidInput);

        let mut run = Agglomeration::new(&graph, with(config.clone())).unwrap();
        let mut wrong = ndarray::Array3::<u64>::zeros((6, 20, 19));
        assert_eq!(run.next_threshold_in_place(wrong.view_mut()).unwrap_err().kind(), ErrorKind::InvalidInput);
        run.next_threshold_in_place(volume.view_mut()).unwrap().unwrap();
        volume[[1, 2, 3]] = 987_654_321;
        let e = run.next_threshold_in_place(volume.view_mut()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains("987654321"), "{e}");
    }
}
