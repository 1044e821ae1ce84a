//! The kernel's symbol table as text (`/proc/kallsyms`, or a copy of it): `ADDRESS TYPE
//! NAME [MODULE]` a line, what perf names kernel frames from. Only functions are kept
//! (types `t`, `T`, `w`, `W`), each ending where the next begins, as perf's
//! `symbols__fixup_end` has them. Its addresses are the running kernel's, KASLR's
//! offset included, so a copy names only recordings of the boot it was read in: its
//! `_text` is what a recording's kernel mapping is checked against.

use std::io::BufRead;

use super::{AddressLookup, FrameRef, SymbolError};

const FORMAT: &str = "kallsyms";
/// How far the last function reaches (perf rounds it up to the next page).
const LAST_FUNCTION_SIZE: u64 = 4096;

/// A kernel's functions by address.
#[derive(Debug)]
pub struct KernelSymbols {
    /// Sorted; `names[i]` starts at `addresses[i]` and ends at `addresses[i + 1]`.
    addresses: Vec<u64>,
    names: Vec<Box<str>>,
    /// Where `_text` is: the kernel's text as placed at boot.
    text: Option<u64>,
}

/// Whether `head` starts as kallsyms does: a hex address, a one-letter type, a name.
pub(super) fn looks_like(head: &[u8]) -> bool {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (Some(address), Some(kind), Some(name)) = (words.next(), words.next(), words.next()) else { return false };
    (8..=16).contains(&address.len())
        && address.iter().all(u8::is_ascii_hexdigit)
        && kind.len() == 1
        && kind[0].is_ascii_alphabetic()
        && !name.is_empty()
}

fn corrupt(line: usize, reason: &str) -> SymbolError {
    SymbolError::Corrupt { format: FORMAT, reason: format!("line {line}: {reason}") }
}

impl KernelSymbols {
    /// Reads kallsyms text line by line.
    pub fn read(text: impl BufRead) -> Result<Self, SymbolError> {
        let mut functions: Vec<(u64, Box<str>)> = Vec::new();
        let mut text_at = None;
        let mut any_address = false;
        for (n, line) in text.split(b'\n').enumerate() {
            let line = line.map_err(|e| corrupt(n + 1, &e.to_string()))?;
            if line.is_empty() {
                continue;
            }
            let line = String::from_utf8_lossy(&line);
            let mut words = line.split_ascii_whitespace();
            let (Some(address), Some(kind), Some(name)) = (words.next(), words.next(), words.next()) else {
                return Err(corrupt(n + 1, "not ADDRESS TYPE NAME"));
            };
            let address = u64::from_str_radix(address, 16).map_err(|_| corrupt(n + 1, "the address is not hex"))?;
            any_address |= address != 0;
            if name == "_text" {
                text_at = Some(address);
            }
            if matches!(kind, "t" | "T" | "w" | "W") {
                functions.push((address, name.into()));
            }
        }
        if functions.is_empty() {
            return Err(SymbolError::Unrecognized("kallsyms text without functions".into()));
        }
        if !any_address {
            return Err(SymbolError::Unsupported {
                format: FORMAT,
                reason: "every address is 0: the kernel hides them from readers without CAP_SYSLOG \
                         (kernel.kptr_restrict); copy /proc/kallsyms as root"
                    .into(),
            });
        }
        // Aliases at one address: the first listed stays, as perf keeps it.
        functions.sort_by_key(|&(address, _)| address);
        functions.dedup_by_key(|&mut (address, _)| address);
        let (addresses, names) = functions.into_iter().unzip();
        Ok(Self { addresses, names, text: text_at })
    }

    /// Where `_text` lies in the kernel this was read from.
    pub fn text_address(&self) -> Option<u64> {
        self.text
    }
}

impl AddressLookup for KernelSymbols {
    /// `address` is a kernel virtual address, as a recording holds it.
    fn each_frame(&self, address: u64, each: &mut dyn FnMut(FrameRef<'_>)) -> Result<(), SymbolError> {
        let Some(i) = self.addresses.partition_point(|&a| a <= address).checked_sub(1) else { return Ok(()) };
        let end =
            self.addresses.get(i + 1).copied().unwrap_or_else(|| self.addresses[i].saturating_add(LAST_FUNCTION_SIZE));
        if address < end {
            each(FrameRef { name: &self.names[i], file: None, line: 0 });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "ffffffff81000000 T _text\nffffffff81000000 T _stext\nffffffff81001000 t helper\n\
                        ffffffff81002000 D some_data\nffffffff81003000 T last_function\n";

    #[test]
    fn functions_end_where_the_next_begins_and_the_last_a_page_on() {
        let k = KernelSymbols::read(TEXT.as_bytes()).unwrap();
        assert!(looks_like(TEXT.as_bytes()));
        assert_eq!(k.text_address(), Some(0xffffffff81000000));
        let name = |a| k.lookup(a).unwrap().first().map(|f| f.name.clone());
        assert_eq!(name(0xffffffff81000010).as_deref(), Some("_text"));
        // Data does not end a function: perf keeps functions only.
        assert_eq!(name(0xffffffff81002010).as_deref(), Some("helper"));
        assert_eq!(name(0xffffffff81003fff).as_deref(), Some("last_function"));
        assert_eq!(name(0xffffffff81004000), None);
        assert_eq!(name(0x1000), None);
    }

    #[test]
    fn hidden_addresses_and_other_text_are_errors() {
        let hidden = "0000000000000000 T _text\n0000000000000000 t helper\n";
        assert!(matches!(KernelSymbols::read(hidden.as_bytes()), Err(SymbolError::Unsupported { .. })));
        assert!(matches!(KernelSymbols::read(&b"ffffffff81000000 T\n"[..]), Err(SymbolError::Corrupt { .. })));
        assert!(matches!(KernelSymbols::read(&b"zzzz T name\n"[..]), Err(SymbolError::Corrupt { .. })));
        assert!(!looks_like(b"main;work;leaf 10\n"));
        assert!(!looks_like(b"MODULE Linux x86_64 0A0 work\n"));
    }
}
