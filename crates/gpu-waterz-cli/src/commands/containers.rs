//! What `segment` writes its results into: a folder of `.npy` files (with
//! `summary.json` and JSON merge histories), a zarr v3 group, or an HDF5
//! file, chosen by the output path's suffix.
//!
//! zarr and HDF5 hold one `segmentation_<i>` array per threshold (zstd or
//! deflate compressed, chunked), with funlib/daisy's spatial attributes
//! (`resolution`, `offset`, `axis_names`, `units`) and the threshold; the
//! summary is the group's (file's) `gpu_waterz` attribute; merge histories
//! and region graphs are compact arrays beside them (`merge_history_<i>`:
//! `(n, 3)` uint64 `a, b, c`, `merge_scores_<i>`: float64;
//! `region_graph_<i>`: `(n, 2)` uint64, `region_graph_scores_<i>`).

use anyhow::{anyhow, Context, Result};
use gpu_waterz::{Merge, ScoredEdge};
use gpu_waterz_cli::io::{write_atomically, write_npy, StagingStore};
use ndarray::{Array3, ArrayView3};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The kind of output, by the path's suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// A folder of `.npy` files and `summary.json`.
    NpyFolder,
    /// A zarr v3 group (a folder ending in `.zarr`).
    Zarr,
    /// An HDF5 file (`.h5`, `.hdf5`, `.hdf`).
    Hdf5,
}

impl Container {
    /// The container a path names.
    pub fn of(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("zarr") => Container::Zarr,
            Some("h5" | "hdf5" | "hdf") => Container::Hdf5,
            _ => Container::NpyFolder,
        }
    }

    /// Whether the output is one file (else a folder).
    pub fn is_file(self) -> bool {
        self == Container::Hdf5
    }
}

/// The element type segmentations are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LabelType {
    /// uint32 when every label fits, else uint64.
    Auto,
    /// Always uint32 (an error when a label does not fit).
    Uint32,
    /// Always uint64 (waterz's type).
    Uint64,
}

/// A segmentation in the element type chosen for it.
enum Labels<'a> {
    U32(Array3<u32>),
    U64(ArrayView3<'a, u64>),
}

impl Labels<'_> {
    fn dtype(&self) -> &'static str {
        match self {
            Labels::U32(_) => "uint32",
            Labels::U64(_) => "uint64",
        }
    }
}

impl LabelType {
    /// Whether labels up to `max_label` are written as uint32 (else
    /// uint64); an error where uint32 is asked and they do not fit.
    pub fn narrow_for(self, max_label: u64) -> Result<bool> {
        let fits = max_label <= u64::from(u32::MAX);
        match self {
            LabelType::Uint64 => Ok(false),
            LabelType::Auto => Ok(fits),
            LabelType::Uint32 if fits => Ok(true),
            LabelType::Uint32 => {
                Err(anyhow!("--label-type uint32: label {max_label} does not fit uint32 (use auto or uint64)"))
            }
        }
    }
}

fn narrow(segmentation: &Array3<u64>, label_type: LabelType) -> Result<Labels<'_>> {
    use ndarray::parallel::prelude::*;
    let max = segmentation.par_iter().copied().max().unwrap_or(0);
    Ok(if label_type.narrow_for(max)? {
        Labels::U32(ndarray::Zip::from(segmentation).par_map_collect(|&l| l as u32))
    } else {
        Labels::U64(segmentation.view())
    })
}

/// Writes one run's results into a container at `path` (the staging
/// location of [`super::outputs::OutputFolder`]).
pub struct ContainerWriter {
    container: Container,
    path: PathBuf,
    label_type: LabelType,
    spatial: Map<String, Value>,
    zarr_format: u8,
    zarr: Option<Arc<StagingStore>>,
    hdf5: Option<hdf5_pure::FileBuilder>,
}

impl ContainerWriter {
    /// Starts writing `container` at `path` (a folder that exists for the
    /// folder kinds; a file to be created for HDF5). `spatial` holds the
    /// spatial attributes each segmentation carries.
    pub fn new(
        container: Container,
        path: &Path,
        label_type: LabelType,
        spatial: Map<String, Value>,
        zarr_format: u8,
    ) -> Result<Self> {
        if container == Container::Zarr && !(zarr_format == 2 || zarr_format == 3) {
            return Err(anyhow!("--zarr-format is 2 or 3, not {zarr_format}"));
        }
        let zarr = match container {
            Container::Zarr => {
                Some(Arc::new(StagingStore::new(path).with_context(|| format!("opening {}", path.display()))?))
            }
            _ => None,
        };
        let hdf5 = (container == Container::Hdf5).then(hdf5_pure::FileBuilder::new);
        Ok(Self { container, path: path.to_path_buf(), label_type, spatial, zarr_format, zarr, hdf5 })
    }

    /// Writes the segmentation of threshold `i`; returns its name in the
    /// container and its element type.
    pub fn segmentation(
        &mut self,
        i: usize,
        threshold: f64,
        segmentation: &Array3<u64>,
    ) -> Result<(String, &'static str)> {
        let mut attributes = self.spatial.clone();
        attributes.insert("threshold".into(), threshold.into());
        self.labels(&format!("segmentation_{i}"), segmentation, attributes)
    }

    /// Writes the fragments the merging started from; returns their name
    /// and element type.
    pub fn fragments(&mut self, fragments: &Array3<u64>) -> Result<(String, &'static str)> {
        self.labels("fragments", fragments, self.spatial.clone())
    }

    /// Writes a label volume as `stem` (`stem.npy` in an npy folder).
    fn labels(
        &mut self,
        stem: &str,
        segmentation: &Array3<u64>,
        attributes: Map<String, Value>,
    ) -> Result<(String, &'static str)> {
        let labels = narrow(segmentation, self.label_type)?;
        let dtype = labels.dtype();
        let (z, y, x) = segmentation.dim();
        let shape = [z as u64, y as u64, x as u64];
        match self.container {
            Container::NpyFolder => {
                let name = format!("{stem}.npy");
                let path = self.path.join(&name);
                match &labels {
                    Labels::U32(a) => write_npy(&path, &a.view())?,
                    Labels::U64(a) => write_npy(&path, a)?,
                }
                Ok((name, dtype))
            }
            Container::Zarr => {
                let name = stem.to_string();
                let chunks = [shape[0].clamp(1, 64), shape[1].clamp(1, 64), shape[2].clamp(1, 64)];
                match labels {
                    Labels::U32(a) => {
                        self.zarr_array(&name, &shape, &chunks, &attributes, standard(&a.view()).as_ref())?
                    }
                    Labels::U64(a) => self.zarr_array(&name, &shape, &chunks, &attributes, standard(&a).as_ref())?,
                }
                Ok((name, dtype))
            }
            Container::Hdf5 => {
                let name = stem.to_string();
                let builder = self.hdf5.as_mut().expect("an HDF5 writer");
                let chunks = [shape[0].clamp(1, 64), shape[1].clamp(1, 64), shape[2].clamp(1, 64)];
                let dataset = builder.create_dataset(&name);
                match &labels {
                    Labels::U32(a) => dataset.with_u32_data(standard(&a.view()).as_ref()),
                    Labels::U64(a) => dataset.with_u64_data(standard(a).as_ref()),
                };
                dataset.with_shape(&shape).with_chunks(&chunks).with_deflate(4);
                for (key, value) in &attributes {
                    if let Some(v) = hdf5_attribute(value) {
                        dataset.set_attr(key, v);
                    }
                }
                Ok((name, dtype))
            }
        }
    }

    fn zarr_array<T: zarrs::array::Element + Copy + Default>(
        &self,
        name: &str,
        shape: &[u64; 3],
        chunks: &[u64; 3],
        attributes: &Map<String, Value>,
        values: &[T],
    ) -> Result<()>
    where
        zarrs::array::FillValue: From<T>,
    {
        let numpy = match std::mem::size_of::<T>() {
            4 => "<u4",
            _ => "<u8",
        };
        let array = self.zarr_create(name, shape, chunks, numpy, Some(["z", "y", "x"]), attributes.clone())?;
        array
            .store_array_subset(&array.subset_all(), values)
            .with_context(|| format!("writing the zarr array {name}"))?;
        Ok(())
    }

    /// Whether labels up to `max_label` are written as uint32 by this
    /// writer's label type ([`LabelType::narrow_for`]).
    pub fn narrow_for(&self, max_label: u64) -> Result<bool> {
        self.label_type.narrow_for(max_label)
    }

    /// The store of a zarr v3 writer, whose arrays' chunks are their
    /// elements little-endian through zstd ([`Self::zarr_labels`]): a
    /// caller may encode chunks itself and write them there. None for
    /// other containers and zarr v2 (gzip).
    pub fn zstd_zarr_store(&self) -> Option<Arc<StagingStore>> {
        self.zarr.clone().filter(|_| self.zarr_format == 3)
    }

    /// Creates the `(z, y, x)` zarr array `name` of `shape` in `chunks`
    /// (metadata written), uint32 when `narrow` else uint64, with this
    /// writer's spatial attributes and `attributes`, for a caller that
    /// writes its chunks itself.
    pub fn zarr_labels(
        &self,
        name: &str,
        shape: [u64; 3],
        chunks: [u64; 3],
        narrow: bool,
        attributes: Map<String, Value>,
    ) -> Result<zarrs::array::Array<StagingStore>> {
        let mut all = self.spatial.clone();
        all.extend(attributes);
        let numpy = if narrow { "<u4" } else { "<u8" };
        self.zarr_create(name, &shape, &chunks, numpy, Some(["z", "y", "x"]), all)
    }

    /// Creates the zarr array `name` (metadata written) in this writer's
    /// zarr format: `numpy` names the element type (`<u4`, `<u8`, `<f8`);
    /// zstd compressed in v3, gzip in v2 (what every zarr v2 reader has).
    fn zarr_create(
        &self,
        name: &str,
        shape: &[u64],
        chunks: &[u64],
        numpy: &str,
        dimension_names: Option<[&str; 3]>,
        attributes: Map<String, Value>,
    ) -> Result<zarrs::array::Array<StagingStore>> {
        let store = self.zarr.clone().expect("a zarr store");
        let path = format!("/{name}");
        let array = if self.zarr_format == 2 {
            let metadata: zarrs::array::ArrayMetadataV2 = serde_json::from_value(serde_json::json!({
                "zarr_format": 2,
                "shape": shape,
                "chunks": chunks,
                "dtype": numpy,
                "compressor": {"id": "gzip", "level": 5},
                "fill_value": 0,
                "order": "C",
                "filters": null,
                "dimension_separator": ".",
            }))
            .context("zarr v2 metadata")?;
            let metadata = metadata.with_attributes(attributes);
            zarrs::array::Array::new_with_metadata(store, &path, zarrs::array::ArrayMetadata::V2(metadata))
        } else {
            let (data_type, fill) = match numpy {
                "<u4" => (zarrs::array::data_type::uint32(), zarrs::array::FillValue::from(0u32)),
                "<u8" => (zarrs::array::data_type::uint64(), zarrs::array::FillValue::from(0u64)),
                _ => (zarrs::array::data_type::float64(), zarrs::array::FillValue::from(0f64)),
            };
            let mut builder = zarrs::array::ArrayBuilder::new(shape.to_vec(), chunks.to_vec(), data_type, fill);
            // Little-endian bytes through zstd: what `zstd_zarr_store`'s
            // callers encode themselves.
            builder.array_to_bytes_codec(Arc::new(zarrs::array::codec::BytesCodec::little()));
            builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(3, false))]);
            builder.dimension_names(dimension_names).attributes(attributes);
            builder.build(store, &path)
        }
        .with_context(|| format!("creating the zarr array {name}"))?;
        array.store_metadata().with_context(|| format!("writing the metadata of {name}"))?;
        Ok(array)
    }

    /// Writes the merges of threshold `i`; returns the names written.
    pub fn merge_history(&mut self, i: usize, merges: &[Merge]) -> Result<Vec<String>> {
        let triples: Vec<u64> = merges.iter().flat_map(|m| [m.a, m.b, m.c]).collect();
        let scores: Vec<f64> = merges.iter().map(|m| m.score).collect();
        match self.container {
            Container::NpyFolder => {
                let name = format!("merge_history_{i}.json");
                write_atomically(&self.path.join(&name), serde_json::to_string(merges)?.as_bytes())?;
                Ok(vec![name])
            }
            _ => self.table(&format!("merge_history_{i}"), &format!("merge_scores_{i}"), 3, &triples, &scores),
        }
    }

    /// Writes the remaining region graph of threshold `i`; returns the
    /// names written.
    pub fn region_graph(&mut self, i: usize, edges: &[ScoredEdge]) -> Result<Vec<String>> {
        let pairs: Vec<u64> = edges.iter().flat_map(|e| [e.u, e.v]).collect();
        let scores: Vec<f64> = edges.iter().map(|e| e.score).collect();
        match self.container {
            Container::NpyFolder => {
                let name = format!("region_graph_{i}.json");
                write_atomically(&self.path.join(&name), serde_json::to_string(edges)?.as_bytes())?;
                Ok(vec![name])
            }
            _ => self.table(&format!("region_graph_{i}"), &format!("region_graph_scores_{i}"), 2, &pairs, &scores),
        }
    }

    /// A `(n, width)` uint64 array and its `n` float64 scores.
    fn table(&mut self, name: &str, scores_name: &str, width: u64, ids: &[u64], scores: &[f64]) -> Result<Vec<String>> {
        let n = scores.len() as u64;
        match self.container {
            Container::Zarr => {
                let chunk = n.clamp(1, 1 << 16);
                let ids_array = self.zarr_create(name, &[n, width], &[chunk, width], "<u8", None, Map::new())?;
                ids_array.store_array_subset(&ids_array.subset_all(), ids)?;
                let scores_array = self.zarr_create(scores_name, &[n], &[chunk], "<f8", None, Map::new())?;
                scores_array.store_array_subset(&scores_array.subset_all(), scores)?;
            }
            Container::Hdf5 => {
                let builder = self.hdf5.as_mut().expect("an HDF5 writer");
                builder.create_dataset(name).with_u64_data(ids).with_shape(&[n, width]);
                builder.create_dataset(scores_name).with_f64_data(scores).with_shape(&[n]);
            }
            Container::NpyFolder => unreachable!("npy folders keep JSON"),
        }
        Ok(vec![name.to_string(), scores_name.to_string()])
    }

    /// Finishes the container with the run's summary: `summary.json` in
    /// an npy folder, the group's (file's) `gpu_waterz` attribute else.
    pub fn finish(self, summary: &Value) -> Result<()> {
        let text = serde_json::to_string_pretty(summary)?;
        match self.container {
            Container::NpyFolder => write_atomically(&self.path.join("summary.json"), text.as_bytes())?,
            Container::Zarr if self.zarr_format == 2 => {
                let attributes = serde_json::json!({ "gpu_waterz": summary });
                write_atomically(&self.path.join(".zgroup"), br#"{"zarr_format": 2}"#)?;
                write_atomically(&self.path.join(".zattrs"), serde_json::to_string_pretty(&attributes)?.as_bytes())?;
            }
            Container::Zarr => {
                let store = self.zarr.expect("a zarr store");
                let mut attributes = Map::new();
                attributes.insert("gpu_waterz".into(), summary.clone());
                let group = zarrs::group::GroupBuilder::new().attributes(attributes).build(store, "/")?;
                group.store_metadata().context("writing the zarr group's metadata")?;
            }
            Container::Hdf5 => {
                let mut builder = self.hdf5.expect("an HDF5 writer");
                builder.set_attr("gpu_waterz", hdf5_pure::AttrValue::String(text));
                let bytes = builder.finish().map_err(|e| anyhow!("encoding the HDF5 file: {e}"))?;
                write_atomically(&self.path, &bytes)?;
            }
        }
        Ok(())
    }
}

/// The values of `a` in C order, borrowed when they already are.
fn standard<'a, T: Copy>(a: &'a ArrayView3<'_, T>) -> std::borrow::Cow<'a, [T]> {
    match a.as_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(a.iter().copied().collect()),
    }
}

/// An HDF5 attribute for a JSON value (numbers, strings, and lists of
/// either); `None` for other shapes.
fn hdf5_attribute(value: &Value) -> Option<hdf5_pure::AttrValue> {
    use hdf5_pure::AttrValue;
    match value {
        Value::Number(n) => n.as_f64().map(AttrValue::F64),
        Value::String(s) => Some(AttrValue::String(s.clone())),
        Value::Array(items) if items.iter().all(Value::is_number) => {
            Some(AttrValue::F64Array(items.iter().filter_map(Value::as_f64).collect()))
        }
        Value::Array(items) if items.iter().all(Value::is_string) => {
            Some(AttrValue::StringArray(items.iter().filter_map(|v| v.as_str().map(String::from)).collect()))
        }
        _ => None,
    }
}

/// The spatial attributes a segmentation carries, funlib/daisy's
/// conventions: `resolution` (also as `voxel_size`, the key of newer
/// funlib.persistence) and `offset` (z, y, x; from the input's
/// attributes, a 4-value list losing its channel entry, overridden by the
/// command line), `axis_names` and `units`.
pub fn spatial_attributes(
    input: &Map<String, Value>,
    resolution: Option<&[f64]>,
    offset: Option<&[f64]>,
    units: Option<&str>,
) -> Map<String, Value> {
    let spatial = |key: &str| -> Option<Value> {
        let list = input.get(key)?.as_array()?;
        let list = if list.len() == 4 { &list[1..] } else { &list[..] };
        (list.len() == 3).then(|| Value::Array(list.to_vec()))
    };
    let mut out = Map::new();
    let numbers = |v: &[f64]| Value::Array(v.iter().map(|&x| x.into()).collect());
    if let Some(r) = resolution.map(numbers).or_else(|| spatial("resolution")).or_else(|| spatial("voxel_size")) {
        // funlib.persistence reads `voxel_size` (newer) or `resolution`.
        out.insert("resolution".into(), r.clone());
        out.insert("voxel_size".into(), r);
    }
    if let Some(o) = offset.map(numbers).or_else(|| spatial("offset")) {
        out.insert("offset".into(), o);
    }
    out.insert("axis_names".into(), Value::Array(vec!["z".into(), "y".into(), "x".into()]));
    let units = units.map(|u| Value::Array(vec![u.into(), u.into(), u.into()])).or_else(|| spatial("units"));
    if let Some(u) = units {
        out.insert("units".into(), u);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_by_suffix() {
        assert_eq!(Container::of(Path::new("a/out.zarr")), Container::Zarr);
        assert_eq!(Container::of(Path::new("out.H5")), Container::Hdf5);
        assert_eq!(Container::of(Path::new("out.hdf")), Container::Hdf5);
        assert_eq!(Container::of(Path::new("out")), Container::NpyFolder);
    }

    #[test]
    fn labels_narrow_when_they_fit() {
        let small = Array3::from_elem((1, 1, 2), 7u64);
        assert_eq!(narrow(&small, LabelType::Auto).unwrap().dtype(), "uint32");
        assert_eq!(narrow(&small, LabelType::Uint64).unwrap().dtype(), "uint64");
        let big = Array3::from_elem((1, 1, 2), 1u64 << 40);
        assert_eq!(narrow(&big, LabelType::Auto).unwrap().dtype(), "uint64");
        assert!(narrow(&big, LabelType::Uint32).is_err());
    }

    #[test]
    fn spatial_attributes_follow_funlib() {
        let input: Map<String, Value> =
            serde_json::from_str(r#"{"resolution": [1, 40, 4, 4], "offset": [0, 400, 8, 8], "other": 1}"#).unwrap();
        let a = spatial_attributes(&input, None, None, Some("nm"));
        assert_eq!(a["resolution"], serde_json::json!([40, 4, 4]));
        assert_eq!(a["voxel_size"], a["resolution"]);
        assert_eq!(a["offset"], serde_json::json!([400, 8, 8]));
        assert_eq!(a["units"], serde_json::json!(["nm", "nm", "nm"]));
        assert!(!a.contains_key("other"));
        let b = spatial_attributes(&input, Some(&[8.0, 8.0, 8.0]), None, None);
        assert_eq!(b["resolution"], serde_json::json!([8.0, 8.0, 8.0]));
    }
}
