//! The chain's head, anchored outside the database file.
//!
//! Why: the hash chain ([`super::store`]) shows a row edited or removed in the
//! middle, but a chain cut at its end, or recomputed whole after rows were
//! deleted, is still a valid chain. So each time the ledger's thread commits a
//! batch into the file (where the chain is made, see `fill`), it appends the
//! chain's head, `<seq> <hash>`, to the anchor file beside it
//! (`<file>.anchor`: one short line per batch, not per row), with
//! `fdatasync` under `sync = "full"` as the log has. With an operator key
//! (`[ledger] anchor_key_env` or `anchor_key_file`), each line also carries an
//! HMAC-SHA256 over the sequence and the hash: a forged line then needs the
//! key, which neither file holds. The chain itself stays unkeyed (anyone can
//! recompute it); what a recomputed chain cannot do is reach the anchored
//! hash at the anchored sequence, since every row's hash covers all the rows
//! before it.
//!
//! A table in the file (`ledger_anchored`) records that anchoring started, so
//! an anchor file removed later is told from a ledger written before
//! anchoring existed. What neither file can show: someone who may write both
//! cutting the ledger's tail and the anchor file's lines back to the same
//! point (the fleet's PostgreSQL copy of the anchors, written by the
//! shipper, is outside their reach).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The fewest bytes an anchor key may have: an HMAC-SHA256 key shorter than
/// the hash adds guessable secrecy only.
pub const MIN_KEY_BYTES: usize = 32;

/// How much of the anchor file's end the start check reads for the newest
/// line (a line is ~70 bytes, ~135 with a MAC; lines of several processes
/// may interleave, so more than one is read).
const TAIL_BYTES: u64 = 64 * 1024;

/// What the MAC's input starts with, so a MAC of this format is never
/// mistaken for one of another.
const MAC_DOMAIN: &[u8] = b"weir-ledger-anchor-v1\n";

/// The anchor file of the ledger file `db`: `<file>.anchor` beside it.
pub fn anchor_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|name| name.to_os_string()).unwrap_or_default();
    name.push(".anchor");
    db.with_file_name(name)
}

/// The operator's anchor key: read from the environment variable or file the
/// configuration names, never from the configuration itself. Its bytes are
/// never shown (`Debug` prints none). The HMAC's keyed state is made once.
#[derive(Clone)]
pub struct AnchorKey {
    bytes: Arc<[u8]>,
    keyed: Hmac<Sha256>,
}

impl std::fmt::Debug for AnchorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnchorKey(..)")
    }
}

impl PartialEq for AnchorKey {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq;
        self.bytes.ct_eq(&other.bytes).into()
    }
}

/// Why an anchor key was not accepted (the text never holds the key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnchorKeyError {
    #[error("the anchor key is {0} bytes; it needs at least {MIN_KEY_BYTES} (e.g. `openssl rand -hex 32`)")]
    TooShort(usize),
    #[error("the anchor key cannot key an HMAC-SHA256")]
    Unusable,
}

impl AnchorKey {
    /// The key from its text: surrounding whitespace (a file's last newline)
    /// is not part of it.
    pub fn new(text: &[u8]) -> Result<Self, AnchorKeyError> {
        let trimmed = text.trim_ascii();
        if trimmed.len() < MIN_KEY_BYTES {
            return Err(AnchorKeyError::TooShort(trimmed.len()));
        }
        let keyed = Hmac::<Sha256>::new_from_slice(trimmed).map_err(|_| AnchorKeyError::Unusable)?;
        Ok(Self { bytes: Arc::from(trimmed), keyed })
    }

    /// HMAC-SHA256 over the domain, `seq` and `hash`, lower-case hex.
    pub(super) fn mac(&self, seq: i64, hash: &str) -> String {
        hex::encode(self.hmac(seq, hash).finalize().into_bytes())
    }

    /// Whether `mac` (hex) is this key's MAC of `seq` and `hash` (compared in
    /// constant time).
    fn verifies(&self, seq: i64, hash: &str, mac: &str) -> bool {
        hex::decode(mac).is_ok_and(|bytes| self.hmac(seq, hash).verify_slice(&bytes).is_ok())
    }

    fn hmac(&self, seq: i64, hash: &str) -> Hmac<Sha256> {
        let mut mac = self.keyed.clone();
        mac.update(MAC_DOMAIN);
        mac.update(seq.to_string().as_bytes());
        mac.update(b"\n");
        mac.update(hash.as_bytes());
        mac
    }
}

/// One anchor line: the chain's head after a batch, and its MAC when keyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Anchor {
    pub seq: i64,
    pub hash: String,
    pub mac: Option<String>,
}

impl Anchor {
    /// The line, with its newline.
    fn line(&self) -> String {
        match &self.mac {
            Some(mac) => format!("{} {} {mac}\n", self.seq, self.hash),
            None => format!("{} {}\n", self.seq, self.hash),
        }
    }

    /// A line (without its newline): `<seq> <hash> [<mac>]`, the hashes 64
    /// lower-case hex digits, the sequence from 1.
    fn parse(line: &str) -> Option<Anchor> {
        let mut fields = line.split(' ');
        let seq: i64 = fields.next()?.parse().ok().filter(|seq| *seq > 0)?;
        let hash = fields.next().filter(|hash| is_hash(hash))?.to_owned();
        let mac = match fields.next() {
            Some(mac) if is_hash(mac) => Some(mac.to_owned()),
            Some(_) => return None,
            None => None,
        };
        fields.next().is_none().then_some(Anchor { seq, hash, mac })
    }
}

fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

/// The anchor file as the ledger's thread appends to it: opened once, kept.
pub(super) struct AnchorLog {
    path: PathBuf,
    key: Option<AnchorKey>,
    /// `sync = "full"`: each line is `fdatasync`ed.
    durable: bool,
    file: Option<File>,
}

impl AnchorLog {
    pub(super) fn new(db: &Path, key: Option<AnchorKey>, durable: bool) -> Self {
        Self { path: anchor_path(db), key, durable, file: None }
    }

    /// Opens (creating it owner-only when missing) the file to append to.
    pub(super) fn open(&mut self) -> io::Result<()> {
        if self.file.is_none() {
            self.file = Some(open_for_append(&self.path)?);
        }
        Ok(())
    }

    /// Appends the head `seq`, `hash` as one line (one `write`), with its MAC
    /// when keyed; a failed write closes the file (the next append reopens it).
    pub(super) fn append(&mut self, seq: i64, hash: &str) -> io::Result<()> {
        let mac = self.key.as_ref().map(|key| key.mac(seq, hash));
        self.append_line(&Anchor { seq, hash: hash.to_owned(), mac })
    }

    /// Appends lines read from another anchor file as they were, MACs
    /// included (see [`vouching_lines`]).
    pub(super) fn carry(&mut self, anchors: &[Anchor]) -> io::Result<()> {
        anchors.iter().try_for_each(|anchor| self.append_line(anchor))
    }

    fn append_line(&mut self, anchor: &Anchor) -> io::Result<()> {
        self.open()?;
        let Some(file) = self.file.as_mut() else { return Err(io::Error::other("no anchor file")) };
        let line = anchor.line();
        let written = file.write_all(line.as_bytes()).and_then(|()| match self.durable {
            true => file.sync_data(),
            false => Ok(()),
        });
        if written.is_err() {
            self.file = None;
        }
        written
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the anchor file to `<file>.anchor.tampered-<unix seconds>`
    /// (kept as the evidence), so that anchoring starts afresh; returns the
    /// new name, `None` when there was no file.
    pub(super) fn set_aside(&mut self) -> io::Result<Option<PathBuf>> {
        self.file = None;
        let seconds =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs());
        let mut name = self.path.file_name().map(|name| name.to_os_string()).unwrap_or_default();
        name.push(format!(".tampered-{seconds}"));
        let kept = self.path.with_file_name(name);
        match std::fs::rename(&self.path, &kept) {
            Ok(()) => Ok(Some(kept)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// Opens `path` to append, created 0600 when missing (whatever the umask),
/// and an existing file's group and other bits cleared.
fn open_for_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    super::modes::owner_only_file(&file, path);
    Ok(file)
}

/// Why an anchor does not vouch for the ledger: the ledger was cut or
/// rewritten, or the anchor was forged or removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Tampering {
    #[error(
        "the ledger is shorter than its anchor: it ends at row {rows}, and row {anchored} was anchored \
         (rows were deleted from its end)"
    )]
    Shorter { rows: i64, anchored: i64 },
    #[error(
        "row {seq}'s hash is not the one anchored for it (the chain was recomputed, or rows before it \
         changed)"
    )]
    HeadMismatch { seq: i64 },
    #[error("line {line} of the anchor file has a MAC the anchor key does not verify (a forged anchor)")]
    BadMac { line: usize },
    #[error(
        "line {line} of the anchor file carries no MAC, after lines that do (or as the newest line): it was \
         not written with the anchor key"
    )]
    Unauthenticated { line: usize },
    #[error("line {line} of the anchor file is not an anchor")]
    Unreadable { line: usize },
    #[error("the ledger says it was anchored from row {since}, and its anchor file {path} is missing")]
    MissingAnchorFile { since: i64, path: String },
}

/// Anchors with their numbers (from 1), all in memory: the fleet's anchors
/// of one source, as PostgreSQL returns them.
#[derive(Debug, Default)]
pub(super) struct AnchorLines {
    pub lines: Vec<(usize, Anchor)>,
}

impl AnchorLines {
    /// Checks each anchor's MAC with `key` (see [`MacRule`]).
    pub(super) fn check_macs(&self, key: &AnchorKey) -> Result<(), Tampering> {
        let mut rule = MacRule::new(key, true);
        let mut newest: Option<&(usize, Anchor)> = None;
        for line in &self.lines {
            rule.line(line.0, &line.1)?;
            newest = newest.filter(|kept| kept.1.seq >= line.1.seq).or(Some(line));
        }
        newest.map_or(Ok(()), |(number, anchor)| rule.newest(*number, anchor))
    }
}

/// The MAC rules, line by line: a MAC the key does not verify is a forgery;
/// a line without one is accepted only before the first line that has one
/// (lines anchored before the key was set), and the newest line (highest
/// sequence) must have one. `complete`: every line is seen (else only the
/// file's end, where a keyless line has no earlier keyed one to be judged by).
pub(super) struct MacRule<'a> {
    key: &'a AnchorKey,
    complete: bool,
    keyed_seen: bool,
}

impl<'a> MacRule<'a> {
    pub(super) fn new(key: &'a AnchorKey, complete: bool) -> Self {
        Self { key, complete, keyed_seen: false }
    }

    pub(super) fn line(&mut self, number: usize, anchor: &Anchor) -> Result<(), Tampering> {
        match &anchor.mac {
            Some(mac) if self.key.verifies(anchor.seq, &anchor.hash, mac) => self.keyed_seen = true,
            Some(_) => return Err(Tampering::BadMac { line: number }),
            None if self.keyed_seen && self.complete => return Err(Tampering::Unauthenticated { line: number }),
            None => {}
        }
        Ok(())
    }

    pub(super) fn newest(&self, number: usize, anchor: &Anchor) -> Result<(), Tampering> {
        match anchor.mac {
            Some(_) => Ok(()),
            None => Err(Tampering::Unauthenticated { line: number }),
        }
    }
}

/// What a read of the anchor file found: the newest head (the line with the
/// highest sequence: lines of several processes may come out of order) and
/// its line number. The lines are streamed, never all held.
#[derive(Debug, Default)]
pub(super) struct AnchorScan {
    pub newest: Option<(usize, Anchor)>,
    /// The hashes anchored at the sequences asked for (see [`read_all_wanting`]):
    /// the heads of the segments released from the file.
    pub found: std::collections::BTreeMap<i64, String>,
}

/// Reads every line of the anchor file at `path`, their MACs checked with
/// `key`; `None` when there is no such file. An unfinished last line (a
/// write cut off by a lost machine) is left out; any other line that is not
/// an anchor is tampering.
pub(super) fn read_all(path: &Path, key: Option<&AnchorKey>) -> io::Result<Option<Result<AnchorScan, Tampering>>> {
    read_all_wanting(path, key, &std::collections::BTreeSet::new())
}

/// [`read_all`], also keeping the hash of every line whose sequence is in
/// `wanted` (a sequence anchored twice with two hashes keeps the one that
/// differs from the first: a check against it then fails).
pub(super) fn read_all_wanting(
    path: &Path,
    key: Option<&AnchorKey>,
    wanted: &std::collections::BTreeSet<i64>,
) -> io::Result<Option<Result<AnchorScan, Tampering>>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    scan(io::BufReader::new(file), key, true, wanted).map(Some)
}

/// The lines of the anchor file at `path` that anchor one of `heads` (a
/// `seq` and its hash) and that [`MacRule`] accepts with `key` (a MAC it
/// verifies, or none before the first line that has one): the first such
/// line of each head, in the file's order, so the rule still holds where
/// they are carried. A gateway that starts on a tampered tail (`on_tampered
/// = "start"`) sets the file aside and carries these into the fresh one:
/// the heads of segments released from the ledger are vouched for by these
/// lines only, since their rows are gone. A line that is not an anchor is
/// passed over, not an error (the file was found tampered already); a head
/// no line vouches for is not carried, and `verify` then names its segment.
pub(super) fn vouching_lines(
    path: &Path,
    key: Option<&AnchorKey>,
    heads: &std::collections::BTreeMap<i64, String>,
) -> io::Result<Vec<Anchor>> {
    let mut reader = io::BufReader::new(File::open(path)?);
    let mut rule = key.map(|key| MacRule::new(key, true));
    let mut carried = std::collections::BTreeSet::new();
    let (mut lines, mut line) = (Vec::new(), Vec::new());
    for number in 1.. {
        line.clear();
        if io::BufRead::read_until(&mut reader, b'\n', &mut line)? == 0 {
            break;
        }
        let text = line.strip_suffix(b"\n").and_then(|text| std::str::from_utf8(text).ok());
        let Some(anchor) = text.and_then(Anchor::parse) else { continue };
        let accepted = rule.as_mut().is_none_or(|rule| rule.line(number, &anchor).is_ok());
        if accepted && heads.get(&anchor.seq) == Some(&anchor.hash) && carried.insert(anchor.seq) {
            lines.push(anchor);
        }
    }
    Ok(lines)
}

/// Reads the lines in the last [`TAIL_BYTES`] of the anchor file at `path`
/// (the first, possibly partial, line of that window left out; numbered
/// from that window's first whole line), as [`read_all`] does. The start's
/// check reads only these.
pub(super) fn read_tail(path: &Path, key: Option<&AnchorKey>) -> io::Result<Option<Result<AnchorScan, Tampering>>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let length = file.metadata()?.len();
    let start = length.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut text = Vec::new();
    file.read_to_end(&mut text)?;
    let whole_lines = match start {
        0 => &text[..],
        _ => text.iter().position(|byte| *byte == b'\n').map_or(&[][..], |newline| &text[newline + 1..]),
    };
    scan(whole_lines, key, start == 0, &std::collections::BTreeSet::new()).map(Some)
}

fn scan(
    mut reader: impl io::BufRead,
    key: Option<&AnchorKey>,
    complete: bool,
    wanted: &std::collections::BTreeSet<i64>,
) -> io::Result<Result<AnchorScan, Tampering>> {
    let mut rule = key.map(|key| MacRule::new(key, complete));
    let mut newest: Option<(usize, Anchor)> = None;
    let mut found = std::collections::BTreeMap::new();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 || line.last() != Some(&b'\n') {
            break;
        }
        line.pop();
        let Some(anchor) = std::str::from_utf8(&line).ok().and_then(Anchor::parse) else {
            return Ok(Err(Tampering::Unreadable { line: number }));
        };
        if let Some(rule) = &mut rule
            && let Err(tampering) = rule.line(number, &anchor)
        {
            return Ok(Err(tampering));
        }
        if wanted.contains(&anchor.seq) && found.get(&anchor.seq).is_none_or(|first| first == &anchor.hash) {
            found.insert(anchor.seq, anchor.hash.clone());
        }
        if newest.as_ref().is_none_or(|(_, kept)| anchor.seq >= kept.seq) {
            newest = Some((number, anchor));
        }
    }
    if let (Some(rule), Some((number, anchor))) = (&rule, &newest)
        && let Err(tampering) = rule.newest(*number, anchor)
    {
        return Ok(Err(tampering));
    }
    Ok(Ok(AnchorScan { newest, found }))
}

/// The anchor of another chain than the calls' (the admin plane's changes,
/// see `admin::store`): the same lines, file naming and MACs, one line per
/// change the chain commits (each `fdatasync`ed: changes are rare), checked
/// against the chain's rows by [`check_chain`].
pub struct ChainAnchor {
    db: PathBuf,
    log: std::sync::Mutex<AnchorLog>,
}

impl std::fmt::Debug for ChainAnchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainAnchor").field("path", &self.path()).finish_non_exhaustive()
    }
}

impl ChainAnchor {
    /// The anchor of the chain kept in (or named after) `db`: `<db>.anchor`.
    pub fn new(db: &Path, key: Option<AnchorKey>) -> Self {
        Self { db: db.to_owned(), log: std::sync::Mutex::new(AnchorLog::new(db, key, true)) }
    }

    /// The same anchor, its lines keyed by `key`.
    pub fn keyed(&self, key: Option<AnchorKey>) -> Self {
        Self::new(&self.db, key)
    }

    /// Opens the anchor file to append to, creating it when it is missing.
    pub fn open(&self) -> io::Result<()> {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).open()
    }

    /// Appends the chain's head after a change.
    pub fn append(&self, seq: i64, hash: &str) -> io::Result<()> {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).append(seq, hash)
    }

    pub fn path(&self) -> PathBuf {
        anchor_path(&self.db)
    }

    /// Checks the chain whose newest row is `last` (its sequence), and whose
    /// row `seq` has the hash `hash_at(seq)`, against the newest line of this
    /// anchor: a chain cut at its end, or recomputed, does not reach it.
    pub fn check_chain(
        &self,
        key: Option<&AnchorKey>,
        last: i64,
        hash_at: impl Fn(i64) -> Option<String>,
    ) -> io::Result<Result<AnchorVerdict, Tampering>> {
        let scan = match read_all(&self.path(), key)? {
            None => return Ok(Ok(AnchorVerdict::NoFile)),
            Some(Err(tampering)) => return Ok(Err(tampering)),
            Some(Ok(scan)) => scan,
        };
        let Some((_, newest)) = scan.newest else { return Ok(Ok(AnchorVerdict::Empty)) };
        if newest.seq > last {
            return Ok(Err(Tampering::Shorter { rows: last, anchored: newest.seq }));
        }
        if hash_at(newest.seq).as_deref() != Some(newest.hash.as_str()) {
            return Ok(Err(Tampering::HeadMismatch { seq: newest.seq }));
        }
        Ok(Ok(AnchorVerdict::Anchored { seq: newest.seq }))
    }
}

/// What a chain's anchor vouches for (see [`ChainAnchor::check_chain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorVerdict {
    /// The newest anchored head is in the chain, as anchored.
    Anchored { seq: i64 },
    /// The anchor file holds no line yet.
    Empty,
    /// There is no anchor file.
    NoFile,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const HASH_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const HASH_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn key(fill: u8) -> AnchorKey {
        AnchorKey::new(&[fill; 40]).unwrap()
    }

    #[test]
    fn a_line_reads_back_with_and_without_its_mac() {
        let keyed = Anchor { seq: 12, hash: HASH_A.to_owned(), mac: Some(key(b'k').mac(12, HASH_A)) };
        let plain = Anchor { seq: 3, hash: HASH_B.to_owned(), mac: None };
        for anchor in [keyed, plain] {
            let line = anchor.line();
            assert_eq!(Anchor::parse(line.trim_end_matches('\n')), Some(anchor));
        }
        for bad in ["0 ".to_owned() + HASH_A, format!("x {HASH_A}"), "5 abc".to_owned(), format!("5 {HASH_A} zz")] {
            assert_eq!(Anchor::parse(&bad), None, "{bad}");
        }
        assert_eq!(anchor_path(Path::new("/d/ledger.db")), Path::new("/d/ledger.db.anchor"));
    }

    #[test]
    fn a_short_key_is_refused_and_never_shown() {
        assert_eq!(AnchorKey::new(b"  short\n").unwrap_err(), AnchorKeyError::TooShort(5));
        let key = AnchorKey::new(b"0123456789abcdef0123456789abcdef\n").unwrap();
        assert_eq!(format!("{key:?}"), "AnchorKey(..)");
        assert_eq!(key, AnchorKey::new(b"0123456789abcdef0123456789abcdef").unwrap(), "the newline is not part of it");
    }

    #[test]
    fn macs_are_checked_line_by_line() {
        let good = |seq: i64, hash: &str| Anchor { seq, hash: hash.to_owned(), mac: Some(key(b'k').mac(seq, hash)) };
        let plain = |seq: i64, hash: &str| Anchor { seq, hash: hash.to_owned(), mac: None };
        let lines = |anchors: Vec<Anchor>| AnchorLines { lines: (1..).zip(anchors).collect() };

        let before_the_key = lines(vec![plain(1, HASH_A), good(2, HASH_B)]);
        assert_eq!(before_the_key.check_macs(&key(b'k')), Ok(()), "keyless lines before the first keyed one");
        assert_eq!(before_the_key.check_macs(&key(b'o')), Err(Tampering::BadMac { line: 2 }), "another key");

        let forged_after = lines(vec![good(1, HASH_A), plain(2, HASH_B)]);
        assert_eq!(forged_after.check_macs(&key(b'k')), Err(Tampering::Unauthenticated { line: 2 }));
        let forged_newest = lines(vec![plain(1, HASH_A)]);
        assert_eq!(forged_newest.check_macs(&key(b'k')), Err(Tampering::Unauthenticated { line: 1 }));
        let wrong = lines(vec![Anchor { mac: Some(key(b'k').mac(3, HASH_A)), ..good(2, HASH_A) }]);
        assert_eq!(wrong.check_macs(&key(b'k')), Err(Tampering::BadMac { line: 1 }), "a MAC of another seq");

        // The file's scan applies the same rules as it streams.
        let text = |anchors: &[Anchor]| anchors.iter().map(Anchor::line).collect::<String>();
        let scanned =
            |anchors: &[Anchor]| scan(text(anchors).as_bytes(), Some(&key(b'k')), true, &Default::default()).unwrap();
        assert_eq!(scanned(&[plain(1, HASH_A), good(2, HASH_B)]).unwrap().newest.unwrap().1.seq, 2);
        assert_eq!(scanned(&[good(1, HASH_A), plain(2, HASH_B)]).unwrap_err(), Tampering::Unauthenticated { line: 2 });
        assert_eq!(scanned(&[plain(1, HASH_A)]).unwrap_err(), Tampering::Unauthenticated { line: 1 });
    }

    #[test]
    fn the_tail_is_read_from_its_last_whole_line_and_a_torn_line_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db.anchor");
        assert!(read_tail(&path, None).unwrap().is_none(), "no file");
        let mut text = String::new();
        for seq in 1..=2000 {
            text.push_str(&Anchor { seq, hash: HASH_A.to_owned(), mac: None }.line());
        }
        text.push_str("2001 aaaa");
        std::fs::write(&path, &text).unwrap();
        let (number, newest) = read_tail(&path, None).unwrap().unwrap().unwrap().newest.unwrap();
        assert!(number < 2000, "only the end is read: line {number} of the window");
        assert_eq!(newest.seq, 2000, "the torn last line is left out");
        let (number, newest) = read_all(&path, None).unwrap().unwrap().unwrap().newest.unwrap();
        assert_eq!((number, newest.seq), (2000, 2000));

        // Lines of two processes out of order: the newest is the highest sequence.
        let line = |seq| Anchor { seq, hash: HASH_B.to_owned(), mac: None }.line();
        std::fs::write(&path, format!("{}{}{}", line(5), line(9), line(7))).unwrap();
        assert_eq!(
            read_all(&path, None).unwrap().unwrap().unwrap().newest.unwrap(),
            (2, Anchor::parse(line(9).trim_end()).unwrap())
        );

        std::fs::write(&path, format!("{}garbage\n", line(1))).unwrap();
        assert_eq!(read_all(&path, None).unwrap().unwrap().unwrap_err(), Tampering::Unreadable { line: 2 });
    }
}
