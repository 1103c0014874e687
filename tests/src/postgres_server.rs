//! A real PostgreSQL server for one test: a fresh cluster (`initdb`) in a
//! temporary folder, on a free loopback port, stopped when dropped. It can be
//! stopped (`pg_ctl stop -m immediate`: an outage, not a shutdown) and started
//! again on the same port with its data. Needs PostgreSQL's server binaries:
//! `$WEIR_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin` (Debian's
//! `postgresql` package; `.ci/run` installs it), else `PATH`. PostgreSQL
//! refuses to run as root: as root, the server runs as the `postgres` user
//! (which the Debian package creates) through `runuser`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct PostgresServer {
    port: u16,
    /// Holds the cluster (and the server's socket and log).
    dir: tempfile::TempDir,
    running: bool,
}

impl PostgresServer {
    /// A new cluster, started and answering.
    pub fn start() -> PostgresServer {
        // As root the server runs as `postgres`, which must reach the folder:
        // under /tmp, whatever TMPDIR says (it may be under root's home).
        let dir = match as_root() {
            true => tempfile::tempdir_in("/tmp"),
            false => tempfile::tempdir(),
        }
        .expect("a temporary folder for the cluster");
        let server = PostgresServer { port: free_port(), dir, running: false };
        if as_root() {
            run(Command::new("chown").args(["-R", "postgres:postgres"]).arg(server.dir.path()));
        }
        let data = server.data();
        run(server.command("initdb").arg("-D").arg(&data).args([
            "-U",
            "weir",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]));
        let mut server = server;
        server.resume();
        server
    }

    /// The URL a gateway is configured with.
    pub fn url(&self) -> String {
        format!("postgres://weir@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server at once, without a shutdown checkpoint (as a crash
    /// would); its committed data stays.
    pub fn stop(&mut self) {
        if self.running {
            run(self.command("pg_ctl").arg("stop").arg("-D").arg(self.data()).args(["-m", "immediate", "-w"]));
            self.running = false;
        }
    }

    /// Starts the server (again) on its port and waits until it accepts connections.
    pub fn resume(&mut self) {
        assert!(!self.running, "the server is already running");
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        run(self
            .command("pg_ctl")
            .arg("start")
            .arg("-w")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(&log)
            .args(["-o", &options]));
        self.running = true;
    }

    /// One integer the test asks of the database (a count, a sum), on a
    /// connection of its own.
    pub fn integer(&self, sql: &str) -> i64 {
        self.try_integer(sql).unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    /// [`Self::integer`], or the error (before the gateway created the table, say).
    pub fn try_integer(&self, sql: &str) -> Result<i64, String> {
        let url = self.url();
        let sql = sql.to_owned();
        // The blocking client must not run on a tokio worker: a thread of its own.
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).map_err(|error| error.to_string())?;
            let row = client.query_one(&sql, &[]).map_err(|error| error.to_string())?;
            row.try_get::<_, i64>(0).map_err(|error| error.to_string())
        })
        .join()
        .expect("the query thread")
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `program` from the server's binaries, as the `postgres` user when root.
    fn command(&self, program: &str) -> Command {
        let program = binaries().join(program);
        match as_root() {
            true => {
                let mut command = Command::new("runuser");
                command.args(["-u", "postgres", "--"]).arg(program);
                command
            }
            false => Command::new(program),
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if self.running {
            let _ = self.command("pg_ctl").arg("stop").arg("-D").arg(self.data()).args(["-m", "immediate"]).output();
        }
    }
}

fn binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("WEIR_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.filter_map(|entry| entry.ok()).map(|entry| entry.path().join("bin")).collect())
        .unwrap_or_default();
    versions.retain(|dir| dir.join("initdb").is_file());
    versions
        .sort_by_key(|dir| dir.parent().and_then(Path::file_name).and_then(|name| name.to_str()?.parse::<u32>().ok()));
    versions.pop().unwrap_or_default()
}

fn as_root() -> bool {
    let id = Command::new("id").arg("-u").output().expect("`id -u`");
    String::from_utf8_lossy(&id.stdout).trim() == "0"
}

fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap_or_else(|error| {
        panic!(
            "{command:?} did not start ({error}): PostgreSQL's server must be installed (Debian package `postgresql`)"
        )
    });
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("a bound address").port()
}
