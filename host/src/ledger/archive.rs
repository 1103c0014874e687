//! A sealed segment's archive file: its rows as stored, as zstd-compressed
//! JSON lines, in `[ledger] archive_dir`.
//!
//! The file is named after the ledger file and the segment's rows
//! (`ledger.db.segment-000000000001-000000004096.jsonl.zst`: zero-padded, so
//! the names sort in the chain's order). Its first line is a [`Header`]
//! naming the segment, its rows and the hashes it links from and ends at;
//! each next line one row, every column, its hashes and its body
//! ([`ArchivedRow`]). A file is written to a temporary name, synced, and
//! renamed (the folder synced too), so a file under its final name is whole.
//! `weir ledger verify --archive DIR` walks the files in order through the
//! chain's own check (`query::ChainCheck`): a missing, truncated, altered or
//! reordered file breaks the chain and is named.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::query::{ALL_COLUMNS, Link, committed_row};
use super::segments::Segment;
use super::store::{Kind, Row};
use crate::record::Tokens;

/// The format's version, in each header.
const FORMAT: u32 = 1;

/// zstd's level: 3 (its default) compressed a segment of plain calls ~8×
/// in well under the time the rows took to store.
const LEVEL: i32 = 3;

/// What the files end with.
const SUFFIX: &str = ".jsonl.zst";

/// An archive file's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Header {
    pub weir_ledger_segment: u32,
    pub id: i64,
    pub first_seq: i64,
    pub last_seq: i64,
    pub prev_hash: String,
    pub head_hash: String,
    pub rows: i64,
}

/// A row in an archive file: every column as the file held it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ArchivedRow {
    pub seq: i64,
    pub kind: String,
    pub call_id: String,
    pub at_ms: i64,
    pub started_ms: i64,
    pub key_id: Option<String>,
    pub member: Option<String>,
    pub team: Option<String>,
    pub model: String,
    pub category: Option<String>,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    pub charged_worst: bool,
    pub prev_hash: String,
    pub hash: String,
    pub body: String,
}

impl ArchivedRow {
    /// A row of the file, `kind` as stored, after the row whose hash is
    /// `prev_hash` (an archive names every row's, whether the file stores it or not).
    fn of(kind: String, row: Row, link: Link, prev_hash: String) -> Self {
        Self {
            seq: link.seq,
            kind,
            call_id: row.call_id,
            at_ms: row.at_ms,
            started_ms: row.started_ms,
            key_id: row.key_id,
            member: row.member,
            team: row.team,
            model: row.model,
            category: row.category,
            tokens: row.tokens,
            cost_usd: row.cost_usd,
            charged_worst: row.charged_worst,
            prev_hash,
            hash: link.hash,
            body: row.body,
        }
    }

    /// The row as the chain's check takes it (`None` for an unknown kind)
    /// and its link.
    pub(super) fn checked(&self) -> (Option<Row>, Link) {
        let row = Kind::parse(&self.kind).map(|kind| Row {
            kind,
            call_id: self.call_id.clone(),
            at_ms: self.at_ms,
            started_ms: self.started_ms,
            key_id: self.key_id.clone(),
            member: self.member.clone(),
            team: self.team.clone(),
            model: self.model.clone(),
            category: self.category.clone(),
            tokens: self.tokens,
            cost_usd: self.cost_usd,
            body: self.body.clone(),
            charged_worst: self.charged_worst,
            served: None,
            stands_alone: false,
        });
        let link = Link {
            seq: self.seq,
            prev_hash: Some(self.prev_hash.clone()),
            hash: self.hash.clone(),
            covers_columns: false,
        };
        (row, link)
    }
}

/// Why an archive file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("reading the segment's rows: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("row {seq} has a kind this weir does not know (`{kind}`): the segment is not archived")]
    UnknownKind { seq: i64, kind: String },
    #[error("line {line} is not an archived row or header: {error}")]
    Line { line: u64, error: serde_json::Error },
}

/// A file written: its name in the folder and its SHA-256 (hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Written {
    pub name: String,
    pub sha256: String,
}

/// The archive file name of `segment` of the ledger file `ledger`.
pub(super) fn file_name(ledger: &Path, segment: &Segment) -> String {
    format!("{}.segment-{:012}-{:012}{SUFFIX}", stem(ledger), segment.first_seq, segment.last_seq)
}

fn stem(ledger: &Path) -> String {
    ledger.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The temporary name a file is written under (a leading dot, a `.tmp` end).
fn temporary_name(name: &str) -> String {
    format!(".{name}.tmp")
}

/// Writes `segment`'s rows, read from `connection`, to its file in `dir`
/// (the folder and the file owner-only, as every ledger file): to a temporary name, synced, renamed
/// over any earlier file of the same name, and the folder synced.
pub(super) fn write(
    connection: &Connection,
    dir: &Path,
    ledger: &Path,
    segment: &Segment,
) -> Result<Written, ArchiveError> {
    super::modes::create_folder(dir)?;
    let name = file_name(ledger, segment);
    let temporary = dir.join(temporary_name(&name));
    let file = File::create(&temporary)?;
    super::modes::owner_only_file(&file, &temporary);
    let mut encoder = zstd::stream::write::Encoder::new(file, LEVEL)?;
    let written = write_rows(connection, segment, &mut encoder);
    let file = written.and_then(|()| encoder.finish().map_err(ArchiveError::from));
    let synced = file.and_then(|file| file.sync_all().map_err(ArchiveError::from));
    if let Err(error) = synced {
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    let path = dir.join(&name);
    std::fs::rename(&temporary, &path)?;
    File::open(dir)?.sync_all()?;
    let sha256 = digest(&path)?;
    Ok(Written { name, sha256 })
}

fn write_rows(connection: &Connection, segment: &Segment, out: &mut impl Write) -> Result<(), ArchiveError> {
    let header = Header {
        weir_ledger_segment: FORMAT,
        id: segment.id,
        first_seq: segment.first_seq,
        last_seq: segment.last_seq,
        prev_hash: segment.prev_hash.clone(),
        head_hash: segment.head_hash.clone(),
        rows: segment.rows,
    };
    serde_json::to_writer(&mut *out, &header).map_err(io::Error::from)?;
    out.write_all(b"\n")?;
    let mut statement = connection.prepare(&format!("{} WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq", *ALL_COLUMNS))?;
    let mut rows = statement.query([segment.first_seq, segment.last_seq])?;
    let mut prev_hash = segment.prev_hash.clone();
    while let Some(row) = rows.next()? {
        let (kind, _, stored, link) = committed_row(row)?;
        let Some(stored) = stored else { return Err(ArchiveError::UnknownKind { seq: link.seq, kind }) };
        let hash = link.hash.clone();
        let prev = link.prev_hash.clone().unwrap_or_else(|| std::mem::take(&mut prev_hash));
        serde_json::to_writer(&mut *out, &ArchivedRow::of(kind, stored, link, prev)).map_err(io::Error::from)?;
        out.write_all(b"\n")?;
        prev_hash = hash;
    }
    Ok(())
}

/// The SHA-256 of the file at `path`, hex.
pub(super) fn digest(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            return Ok(hex::encode(hasher.finalize()));
        }
        hasher.update(&buffer[..read]);
    }
}

/// Whether `segment`'s archive file is in `dir` with the digest recorded
/// when it was written.
pub(super) fn matches(dir: &Path, segment: &Segment) -> io::Result<bool> {
    let (Some(name), Some(sha256)) = (&segment.archive, &segment.archive_sha256) else { return Ok(false) };
    match digest(&dir.join(name)) {
        Ok(found) => Ok(&found == sha256),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// Removes the temporary files of `ledger`'s archives in `dir` (left by a
/// kill while writing; their segments are written again).
pub(super) fn remove_leftovers(dir: &Path, ledger: &Path) {
    let prefix = format!(".{}.segment-", stem(ledger));
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && name.ends_with(".tmp") {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(file = %entry.path().display(), "removed a half-written ledger archive"),
                Err(error) => {
                    tracing::warn!(file = %entry.path().display(), %error, "cannot remove a half-written ledger archive")
                }
            }
        }
    }
}

/// The archive files of the ledger file `ledger` in `dir`, in name order
/// (the chain's order).
pub(super) fn files(dir: &Path, ledger: &Path) -> io::Result<Vec<PathBuf>> {
    let prefix = format!("{}.segment-", stem(ledger));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.starts_with(&prefix) && name.ends_with(SUFFIX)
        })
        .map(|entry| entry.path())
        .collect();
    files.sort();
    Ok(files)
}

/// An archive file read line by line.
pub(super) struct ArchiveFile {
    lines: io::Lines<BufReader<zstd::stream::read::Decoder<'static, BufReader<File>>>>,
    line: u64,
}

impl ArchiveFile {
    /// Opens `path` and reads its header.
    pub(super) fn open(path: &Path) -> Result<(Header, ArchiveFile), ArchiveError> {
        let decoder = zstd::stream::read::Decoder::new(File::open(path)?)?;
        let mut file = ArchiveFile { lines: BufReader::new(decoder).lines(), line: 0 };
        let Some(first) = file.next_line()? else {
            return Err(ArchiveError::Io(io::Error::new(io::ErrorKind::UnexpectedEof, "the file is empty")));
        };
        let header = serde_json::from_str(&first).map_err(|error| ArchiveError::Line { line: 1, error })?;
        Ok((header, file))
    }

    fn next_line(&mut self) -> Result<Option<String>, ArchiveError> {
        self.line += 1;
        Ok(self.lines.next().transpose()?)
    }

    /// The next row (`None` at the file's end).
    pub(super) fn next_row(&mut self) -> Result<Option<ArchivedRow>, ArchiveError> {
        let Some(text) = self.next_line()? else { return Ok(None) };
        let line = self.line;
        serde_json::from_str(&text).map(Some).map_err(|error| ArchiveError::Line { line, error })
    }
}
