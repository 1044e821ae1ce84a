//! Breakpad debug ids, by which the Firefox Profiler, Breakpad `.sym` files and symbol
//! servers name a module: a GUID and an age in uppercase hex. For ELF the GUID is the
//! build id's first 16 bytes read as a little-endian GUID (`dump_syms`' rule); for
//! Mach-O it is the UUID as stored. The age is 0 for both.

/// The debug id of an ELF file with this GNU build id (shorter ids are zero-padded).
pub fn of_build_id(build_id: &[u8]) -> String {
    let mut guid = [0u8; 16];
    let n = build_id.len().min(16);
    guid[..n].copy_from_slice(&build_id[..n]);
    guid[..4].reverse();
    guid[4..6].reverse();
    guid[6..8].reverse();
    of_uuid(&guid)
}

/// The bytes of a build id written in hex, as profiles name it.
pub fn bytes_of_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

/// The debug id of a Mach-O file with this UUID.
pub fn of_uuid(uuid: &[u8]) -> String {
    let mut id: String = uuid.iter().map(|b| format!("{b:02X}")).collect();
    id.push('0');
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_build_ids_read_as_little_endian_guids() {
        // The GUID's three leading fields (4, 2 and 2 bytes) are byte-swapped, the rest kept.
        let id: Vec<u8> = (0..20).map(|i| [0xc9, 0xee, 0x60, 0x46, 0x0d, 0xf2, 0x32, 0x26][i % 8]).collect();
        assert_eq!(of_build_id(&id), "4660EEC9F20D2632C9EE60460DF232260");
        assert_eq!(of_build_id(&[0xab, 0xcd]), "0000CDAB0000000000000000000000000");
        assert_eq!(of_uuid(&[0x01, 0xa2]), "01A20");
        assert_eq!(bytes_of_hex("0aFf"), Some(vec![0x0a, 0xff]));
        assert_eq!(bytes_of_hex("0af"), None);
        assert_eq!(bytes_of_hex("0g"), None);
    }
}
