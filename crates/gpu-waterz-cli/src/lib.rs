//! The library half of the `gpu-waterz` command line, shared with the
//! benchmarks and tests: reading and writing volumes ([`io`]: `.npy`, HDF5,
//! zarr) and the synthetic CNN-like data generator ([`generate`]).
//! The pipeline itself is the [`gpu_waterz`] facade.

#![forbid(unsafe_code)]

pub use gpu_waterz_core::generate;
pub mod io;
