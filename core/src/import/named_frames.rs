//! Profiles from frames named by a function and a module (DTrace, macOS `sample`, VTune
//! and Visual Studio CSV): one location per distinct (module, function), the module as
//! the location's mapping.

use rustc_hash::FxHashMap as HashMap;

use super::demangle::add_printed_symbol_function;
use crate::model::{Line, LocationId, Mapping, MappingId, Profile, Sample, SourceFormat};

/// Builds a profile from frames named by function and module.
pub(crate) struct NamedFrames {
    pub profile: Profile,
    locations: HashMap<(String, String), LocationId>,
    modules: HashMap<String, MappingId>,
}

impl NamedFrames {
    /// A profile with these (type, unit) sample types.
    pub fn new(source: SourceFormat, sample_types: &[(&str, &str)]) -> Self {
        let mut profile = Profile::new(source);
        for (kind, unit) in sample_types {
            let vt = profile.value_type(kind, unit);
            profile.sample_types.push(vt);
        }
        Self { profile, locations: HashMap::default(), modules: HashMap::default() }
    }

    /// The location of `function` in `module` (`""`: no module).
    pub fn frame(&mut self, function: &str, module: &str) -> LocationId {
        let key = (module.to_owned(), function.to_owned());
        if let Some(&l) = self.locations.get(&key) {
            return l;
        }
        let p = &mut self.profile;
        let function = add_printed_symbol_function(p, function);
        let l = p.add_location(0, vec![Line { function, line: 0, column: 0 }]);
        if !module.is_empty() {
            let mapping = *self.modules.entry(key.0.clone()).or_insert_with(|| {
                let id = MappingId(p.mappings.len() as u32);
                let filename = p.strings.intern(module);
                p.mappings.push(Mapping {
                    id: u64::from(id.0) + 1,
                    filename,
                    has_functions: true,
                    ..Mapping::default()
                });
                id
            });
            p.locations[l.0 as usize].mapping = Some(mapping);
        }
        self.locations.insert(key, l);
        l
    }

    /// Adds a sample unless all its values are zero.
    pub fn sample(&mut self, leaf_first: Vec<LocationId>, values: Vec<i64>) {
        if values.iter().any(|&v| v != 0) {
            self.profile.samples.push(Sample { locations: leaf_first, values, labels: Vec::new() });
        }
    }
}
