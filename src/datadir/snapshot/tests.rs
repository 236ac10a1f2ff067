use super::*;

fn manifest_for(dir: &Path, label: &str) -> Manifest {
    Manifest {
        program: "cairn".into(),
        version: "test".into(),
        network: label.into(),
        tip: ManifestTip {
            height: 7,
            hash: "00".repeat(32),
        },
        schema: 4,
        layout: 1,
        created: 0,
        files: list_files(dir, &|| false).unwrap(),
    }
}

/// A kernel folder as the kernel leaves it: three block files with their undo files, LevelDB
/// tables and logs, and lock files.
fn kernel_folder(root: &Path) -> PathBuf {
    let kernel = root.join("kernel");
    let blocks = kernel.join("blocks");
    fs::create_dir_all(blocks.join("index")).unwrap();
    fs::create_dir_all(kernel.join("chainstate")).unwrap();
    for n in 0..3 {
        fs::write(blocks.join(format!("blk{n:05}.dat")), vec![n as u8; 100]).unwrap();
        fs::write(blocks.join(format!("rev{n:05}.dat")), vec![n as u8; 10]).unwrap();
    }
    fs::write(blocks.join("xor.dat"), [1u8; 8]).unwrap();
    fs::write(blocks.join("index/000005.ldb"), b"table").unwrap();
    fs::write(blocks.join("index/000006.log"), b"log").unwrap();
    fs::write(blocks.join("index/LOCK"), b"").unwrap();
    fs::write(kernel.join("chainstate/000009.ldb"), b"coins").unwrap();
    fs::write(kernel.join("chainstate/MANIFEST-000002"), b"m").unwrap();
    fs::write(kernel.join(".lock"), b"").unwrap();
    kernel
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().ino()
}

#[test]
fn only_files_never_written_again_are_linked() {
    let tmp = tempfile::tempdir().unwrap();
    let kernel = kernel_folder(tmp.path());
    let staged_at = tmp.path().join("staged");
    let staged = stage_kernel(&kernel, &staged_at).unwrap();
    assert!(
        !staged_at.join("blocks/rev00000.dat").exists(),
        "undo files come later"
    );
    let undo = stage_undo(&kernel, &staged_at, &|| false).unwrap();
    assert_eq!((undo.linked, undo.copied), (0, 3));
    let linked = |p: &str| inode(&kernel.join(p)) == inode(&staged_at.join(p));
    for p in [
        "blocks/blk00000.dat",
        "blocks/blk00001.dat",
        "blocks/index/000005.ldb",
        "chainstate/000009.ldb",
    ] {
        assert!(linked(p), "{p} should be linked");
    }
    for p in [
        "blocks/blk00002.dat",
        "blocks/rev00000.dat",
        "blocks/rev00001.dat",
        "blocks/rev00002.dat",
        "blocks/xor.dat",
        "blocks/index/000006.log",
        "chainstate/MANIFEST-000002",
    ] {
        assert!(!linked(p), "{p} should be copied");
        assert_eq!(
            fs::read(kernel.join(p)).unwrap(),
            fs::read(staged_at.join(p)).unwrap()
        );
    }
    assert!(!staged_at.join("blocks/index/LOCK").exists());
    assert!(!staged_at.join(".lock").exists());
    assert_eq!((staged.linked, staged.copied), (4, 4));
}

#[test]
fn a_whole_snapshot_is_checked_once_and_marked_started_from() {
    let tmp = tempfile::tempdir().unwrap();
    let staging = tmp.path().join("staging");
    let kernel = kernel_folder(tmp.path());
    stage_kernel(&kernel, &staging.join("kernel")).unwrap();
    stage_undo(&kernel, &staging.join("kernel"), &|| false).unwrap();
    let root = tmp.path().join("dest");
    let (partial, finished) = (root.join("regtest.partial"), root.join("regtest"));
    fs::create_dir_all(&partial).unwrap();
    place(&staging, &partial, &|| false).unwrap();
    let manifest = manifest_for(&partial, "regtest");
    assert_eq!(manifest.files.len(), 11);
    super::super::write_snapshot_identity(&partial.join(super::super::IDENTITY_FILE), "regtest")
        .unwrap();
    complete(&partial, &finished, &manifest).unwrap();
    assert!(!partial.exists());

    // A copy of it that lost its manifest (an interrupted copy) is refused, as is the snapshot
    // itself before it is checked.
    let copy = tmp.path().join("copy/regtest");
    fs::create_dir_all(&copy).unwrap();
    fs::copy(finished.join("cairn.json"), copy.join("cairn.json")).unwrap();
    assert_eq!(check_before_start(&copy, "regtest", 4, 1).unwrap(), None);
    let open =
        |dir: &Path| super::super::DataDir::open(dir, crate::types::Network::Regtest, "regtest");
    let err = open(&copy).unwrap_err();
    assert!(err.to_string().contains("without its manifest"), "{err}");
    assert!(open(&finished).is_err());

    // An older schema than this cairn's is started from (and upgraded as any index).
    let checked = check_before_start(&finished, "regtest", 5, 1).unwrap();
    assert_eq!(checked, Some(manifest));
    assert!(finished.join(VERIFIED_FILE).exists());
    open(&finished).unwrap();
    // Started from once: the node's own writes later are not checked against it.
    fs::write(finished.join("kernel/blocks/blk00002.dat"), b"grown").unwrap();
    assert_eq!(
        check_before_start(&finished, "regtest", 4, 1).unwrap(),
        None
    );
}

fn finished_snapshot(root: &Path, label: &str) -> (PathBuf, Manifest) {
    let dir = root.join(label);
    fs::create_dir_all(dir.join("index")).unwrap();
    fs::write(dir.join("index/000001.sst"), vec![7u8; 5000]).unwrap();
    fs::write(dir.join("cairn.json"), b"{}").unwrap();
    let manifest = manifest_for(&dir, label);
    let text = serde_json::to_vec(&manifest).unwrap();
    fs::write(dir.join(MANIFEST_FILE), text).unwrap();
    (dir, manifest)
}

#[test]
fn a_damaged_file_is_refused_and_the_snapshot_stays_unstarted() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = finished_snapshot(tmp.path(), "regtest");
    let mut bytes = fs::read(dir.join("index/000001.sst")).unwrap();
    bytes[4321] ^= 1;
    fs::write(dir.join("index/000001.sst"), &bytes).unwrap();
    let err = check_before_start(&dir, "regtest", 4, 1).unwrap_err();
    assert!(
        matches!(&err, SnapshotError::Damaged { file, .. } if file == "index/000001.sst"),
        "{err}"
    );
    bytes.pop();
    fs::write(dir.join("index/000001.sst"), &bytes).unwrap();
    let err = check_before_start(&dir, "regtest", 4, 1).unwrap_err();
    assert!(err.to_string().contains("4999 bytes"), "{err}");
    fs::remove_file(dir.join("index/000001.sst")).unwrap();
    assert!(check_before_start(&dir, "regtest", 4, 1).is_err());
    assert!(dir.join(MANIFEST_FILE).exists());
}

#[test]
fn other_networks_newer_versions_and_paths_outside_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, manifest) = finished_snapshot(tmp.path(), "regtest");
    // Asked for signet where only a regtest snapshot is.
    let err = check_before_start(&tmp.path().join("signet"), "signet", 4, 1).unwrap_err();
    assert!(
        err.to_string()
            .contains("holds a snapshot of regtest, not signet"),
        "{err}"
    );
    // The folder renamed to another network's name.
    let err = check_before_start(&dir, "signet", 4, 1).unwrap_err();
    assert!(matches!(err, SnapshotError::OtherNetwork { .. }), "{err}");
    let err = check_before_start(&dir, "regtest", 3, 1).unwrap_err();
    assert!(
        matches!(err, SnapshotError::NewerSchema { found: 4, .. }),
        "{err}"
    );
    let err = check_before_start(&dir, "regtest", 4, 0).unwrap_err();
    assert!(matches!(err, SnapshotError::NewerLayout { .. }), "{err}");
    let mut outside = manifest.clone();
    outside.files.push(ManifestFile {
        path: "../regtest/cairn.json".into(),
        size: 2,
        sha256: String::new(),
    });
    fs::write(
        dir.join(MANIFEST_FILE),
        serde_json::to_vec(&outside).unwrap(),
    )
    .unwrap();
    let err = check_before_start(&dir, "regtest", 4, 1).unwrap_err();
    assert!(err.to_string().contains("not a path inside"), "{err}");
    fs::write(dir.join(MANIFEST_FILE), b"{\"program\": \"cairn\"").unwrap();
    let err = check_before_start(&dir, "regtest", 4, 1).unwrap_err();
    assert!(matches!(err, SnapshotError::BadManifest { .. }), "{err}");
}

#[test]
fn symbolic_links_are_followed_when_staging_and_refused_in_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let kernel = kernel_folder(tmp.path());
    // The block files on another disk, linked in as operators do.
    let elsewhere = tmp.path().join("elsewhere");
    fs::rename(kernel.join("blocks"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, kernel.join("blocks")).unwrap();
    let staged_at = tmp.path().join("staged");
    stage_kernel(&kernel, &staged_at).unwrap();
    stage_undo(&kernel, &staged_at, &|| false).unwrap();
    for p in [
        "blocks/blk00000.dat",
        "blocks/rev00002.dat",
        "blocks/index/000005.ldb",
    ] {
        let meta = fs::symlink_metadata(staged_at.join(p)).unwrap();
        assert!(meta.is_file(), "{p} not staged as a file");
    }

    let (dir, manifest) = finished_snapshot(tmp.path(), "regtest");
    let target = tmp.path().join("outside.sst");
    fs::rename(dir.join("index/000001.sst"), &target).unwrap();
    std::os::unix::fs::symlink(&target, dir.join("index/000001.sst")).unwrap();
    fs::write(
        dir.join(MANIFEST_FILE),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let err = check_before_start(&dir, "regtest", 4, 1).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
}

#[test]
fn an_interrupted_snapshot_is_never_started_from() {
    let tmp = tempfile::tempdir().unwrap();
    let partial = tmp.path().join("regtest.partial");
    fs::create_dir_all(partial.join("kernel")).unwrap();
    let err = check_before_start(&tmp.path().join("regtest"), "regtest", 4, 1).unwrap_err();
    assert!(matches!(err, SnapshotError::Incomplete { .. }), "{err}");
    // Another network's interrupted snapshot does not stand in the way.
    check_before_start(&tmp.path().join("signet"), "signet", 4, 1).unwrap();
}
