//! Reading and writing the files of `dtp cred`: bounded reads, private
//! files created with mode 0600, no silent overwrites, atomic replacement.
//!
//! Everything that touches the filesystem for `dtp cred` is here; this
//! module knows nothing of what the files mean.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::cli_error::CliError;

/// Who may read a file we write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Owner only (0600): private keys.
    Private,
    /// Owner writes, anyone reads (0644, less the umask).
    Public,
}

impl Access {
    fn mode(self) -> u32 {
        match self {
            Access::Private => 0o600,
            Access::Public => 0o644,
        }
    }
}

/// `FILE.pub`: where the public half of `FILE` goes.
pub(crate) fn pub_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".pub");
    PathBuf::from(name)
}

/// Reads a text file of at most `max` bytes. A file that cannot be read is
/// an IO error (exit 1) — one that does not exist is bad input (exit 2,
/// NOT_FOUND); one that is too long or not UTF-8 is bad input (exit 2)
/// reported with `code`.
pub(crate) fn read_text(path: &Path, max: usize, code: &str) -> Result<String, CliError> {
    let file = File::open(path).map_err(|e| CliError::io(path.display(), e))?;
    let mut bytes = Vec::new();
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::io(path.display(), e))?;
    if bytes.len() > max {
        return Err(CliError::usage(
            code,
            format_args!("{}: longer than {max} bytes", path.display()),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| CliError::usage(code, format_args!("{}: not UTF-8 text", path.display())))
}

/// Like [`read_text`], but a file that does not exist reads as empty.
pub(crate) fn read_text_or_empty(path: &Path, max: usize, code: &str) -> Result<String, CliError> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        _ => read_text(path, max, code),
    }
}

/// Refuses (exit 2, `FILE_EXISTS`) if any of `paths` exists and `force` is
/// not set. Checked before writing the first of several files, so a refusal
/// leaves nothing half-written.
pub(crate) fn check_absent(paths: &[&Path], force: bool) -> Result<(), CliError> {
    if force {
        return Ok(());
    }
    for path in paths {
        if fs::symlink_metadata(path).is_ok() {
            return Err(exists(path));
        }
    }
    Ok(())
}

fn exists(path: &Path) -> CliError {
    CliError::usage(
        "FILE_EXISTS",
        format_args!(
            "{} already exists; pass --force to replace it",
            path.display()
        ),
    )
}

/// Writes a new file with the given access.
///
/// Without `force` the file is created exclusively (`O_EXCL`): an existing
/// file — even one created since [`check_absent`] — is never touched. With
/// `force` the contents go to a temporary file beside it, created with the
/// final mode from the start (a private key is never readable by others,
/// not even for a moment), then renamed over the old file.
pub(crate) fn write_file(
    path: &Path,
    contents: &str,
    access: Access,
    force: bool,
) -> Result<(), CliError> {
    if force {
        return replace_file(path, contents, access);
    }
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(access.mode())
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => exists(path),
            _ => CliError::io(path.display(), e),
        })?;
    fill(file, contents).map_err(|e| {
        let _ = fs::remove_file(path);
        CliError::io(path.display(), e)
    })
}

/// Replaces `path` atomically: readers see the old contents or the new,
/// never a torn file.
pub(crate) fn replace_file(path: &Path, contents: &str, access: Access) -> Result<(), CliError> {
    let tmp = temp_path(path);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(access.mode())
        .open(&tmp)
        .map_err(|e| CliError::io(tmp.display(), e))?;
    fill(file, contents)
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = fs::remove_file(&tmp);
            CliError::io(path.display(), e)
        })
}

fn fill(mut file: File, contents: &str) -> io::Result<()> {
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

/// `.NAME.tmp.PID` in the same directory (so the rename stays on one
/// filesystem).
fn temp_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_else(|| "dtp-cred".as_ref()));
    name.push(format!(".tmp.{}", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// `unwrap` for our error type, which has no `Debug`.
    fn ok<T>(r: Result<T, CliError>) -> T {
        match r {
            Ok(v) => v,
            Err(CliError::Input(l) | CliError::Io(l)) => panic!("{l}"),
            Err(CliError::BrokenPipe) => panic!("broken pipe"),
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("dtp-cred-files-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn private_files_are_0600_and_never_overwritten_without_force() {
        let dir = scratch("private");
        let key = dir.join("k");
        ok(write_file(&key, "one", Access::Private, false));
        assert_eq!(
            fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(matches!(
            write_file(&key, "two", Access::Private, false),
            Err(CliError::Input(line)) if line.starts_with("FILE_EXISTS ")
        ));
        assert!(check_absent(&[&key], false).is_err());
        assert!(check_absent(&[&key], true).is_ok());
        assert_eq!(fs::read_to_string(&key).unwrap(), "one");

        // --force replaces, and a once-public file becomes private.
        fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
        ok(write_file(&key, "two", Access::Private, true));
        assert_eq!(fs::read_to_string(&key).unwrap(), "two");
        assert_eq!(
            fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_are_bounded_and_missing_files_can_read_as_empty() {
        let dir = scratch("read");
        let f = dir.join("f");
        fs::write(&f, "12345").unwrap();
        assert_eq!(ok(read_text(&f, 5, "X")), "12345");
        assert!(matches!(read_text(&f, 4, "X"), Err(CliError::Input(l)) if l.starts_with("X ")));
        fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(matches!(read_text(&f, 4, "X"), Err(CliError::Input(l)) if l.contains("UTF-8")));
        let missing = dir.join("missing");
        assert!(
            matches!(read_text(&missing, 4, "X"), Err(CliError::Input(l)) if l.starts_with("NOT_FOUND "))
        );
        assert_eq!(ok(read_text_or_empty(&missing, 4, "X")), "");
        assert_eq!(pub_path(&f), dir.join("f.pub"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
