//! The commands, one module each, and the helpers they share.

pub mod blockwise;
pub mod demo;
pub mod evaluate;
pub mod generate;
pub mod greyscale;
pub mod ndimage;
pub mod segment;

mod containers;
mod input;
mod outputs;
mod progress;
