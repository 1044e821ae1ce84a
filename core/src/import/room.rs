//! What a model may grow to ([`ParseOptions::max_model_bytes`]): importers count what
//! they build, sample by sample, and stop with [`Error::ModelTooLarge`] at the limit
//! instead of growing. A small input can expand far past its size (a Firefox sample
//! walks a stack chain of any depth, a call graph unfolds into every path through it),
//! so the limit is checked as the model is built, never estimated from the input.

use super::ParseOptions;
use crate::model::{Sample, Samples};
use crate::{Error, Result};

/// Bytes a sample counts for, beyond its frames: its entry in the flat sample vectors,
/// values and labels, and its share of what an analysis builds from it (as the
/// server's budget prices a pprof sample).
pub const SAMPLE_BYTES: u64 = 240;
/// Bytes each frame of a sample's stack counts for (a location id, and its share of an
/// analysis).
pub const FRAME_BYTES: u64 = 16;

/// What `samples` samples of `frames` frames in all count for.
pub fn model_bytes(samples: u64, frames: u64) -> u64 {
    samples.saturating_mul(SAMPLE_BYTES).saturating_add(frames.saturating_mul(FRAME_BYTES))
}

/// What `profile`'s samples count for ([`model_bytes`]).
pub fn profile_bytes(profile: &crate::Profile) -> u64 {
    let frames = profile.samples.iter().map(|s| s.locations.len() as u64).sum();
    model_bytes(profile.samples.len() as u64, frames)
}

/// The room left for a model being built.
#[derive(Debug)]
pub struct Room {
    limit: u64,
    used: u64,
}

impl Room {
    pub fn new(options: &ParseOptions) -> Self {
        Room { limit: options.max_model_bytes, used: 0 }
    }

    /// Counts `bytes` about to be built; fails, building nothing, past the limit.
    pub fn take(&mut self, bytes: u64) -> Result<()> {
        let used = self.used.saturating_add(bytes);
        if used > self.limit {
            return Err(Error::ModelTooLarge { limit: self.limit });
        }
        self.used = used;
        Ok(())
    }

    /// Counts `samples` samples of `frames` frames in all.
    pub fn take_samples(&mut self, samples: u64, frames: u64) -> Result<()> {
        self.take(model_bytes(samples, frames))
    }

    /// Adds `sample` to `samples` if there is room for it.
    pub fn push(&mut self, samples: &mut Samples, sample: Sample) -> Result<()> {
        self.take_samples(1, sample.locations.len() as u64)?;
        samples.push(sample);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_past_the_limit_is_not_added() {
        let mut room =
            Room::new(&ParseOptions { max_model_bytes: 2 * SAMPLE_BYTES + 3 * FRAME_BYTES, ..Default::default() });
        let mut samples = Samples::new();
        let sample = |frames: u32| Sample {
            locations: (0..frames).map(crate::model::LocationId).collect(),
            ..Default::default()
        };
        room.push(&mut samples, sample(2)).unwrap();
        assert_eq!(
            room.push(&mut samples, sample(2)),
            Err(Error::ModelTooLarge { limit: 2 * SAMPLE_BYTES + 3 * FRAME_BYTES })
        );
        assert_eq!(samples.len(), 1);
        room.push(&mut samples, sample(1)).unwrap();
        assert_eq!(samples.len(), 2);
    }
}
