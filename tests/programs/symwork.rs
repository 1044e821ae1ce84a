//! symwork in Rust: modules, generics, trait methods, closures and iterators, so that
//! symbolization meets legacy and v0 mangled names and inlined frames.
use std::collections::HashMap;
use std::hint::black_box;

mod numeric {
    #[inline(always)]
    fn curve(x: f64) -> f64 {
        ((0.5 * x - 1.5) * x + 2.0) * x / (1.0 + x * x)
    }

    #[inline(never)]
    pub fn integrate(from: f64, to: f64, steps: u32) -> f64 {
        let width = (to - from) / f64::from(steps);
        (0..steps).map(|i| curve(from + (f64::from(i) + 0.5) * width)).sum::<f64>() * width
    }
}

trait Checksum {
    fn checksum(&self) -> u64;
}

struct Block<T> {
    words: Vec<T>,
}

impl<T: Copy + Into<u64>> Checksum for Block<T> {
    #[inline(never)]
    fn checksum(&self) -> u64 {
        self.words.iter().fold(0xcbf29ce484222325u64, |h, &w| mix(h, w.into()))
    }
}

#[inline(always)]
fn mix(h: u64, k: u64) -> u64 {
    (h ^ k).wrapping_mul(0x100000001b3).rotate_left(17)
}

#[inline(never)]
fn count_keys(keys: &[u32]) -> usize {
    let mut counts: HashMap<u32, u32> = HashMap::new();
    for k in keys {
        *counts.entry(k % 4099).or_default() += 1;
    }
    counts.len()
}

fn main() {
    let rounds: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let block = Block { words: (0..1u32 << 18).map(|i| i.wrapping_mul(2654435761)).collect::<Vec<u32>>() };
    let keys: Vec<u32> = (0..100_000u32).map(|i| i.wrapping_mul(7919)).collect();
    let (mut sum, mut area, mut distinct) = (0u64, 0f64, 0usize);
    for r in 0..rounds {
        sum = sum.wrapping_add(black_box(&block).checksum());
        area += numeric::integrate(0.0, 4.0 + f64::from(r), black_box(400_000));
        distinct += count_keys(black_box(&keys));
    }
    println!("{sum:x} {area:.3} {distinct}");
}
