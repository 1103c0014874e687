//! A real PostgreSQL server for one test: a fresh cluster (`initdb`) in a
//! temporary folder, on a free loopback port, stopped when dropped. It can be
//! stopped (`pg_ctl stop -m immediate`: an outage, not a shutdown) and started
//! again on the same port with its data. It can require a password over TCP
//! ([`PostgresServer::start_with_password`]). Needs PostgreSQL's server binaries:
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
    /// The `weir` user's password, when TCP connections need one.
    password: Option<String>,
}

impl PostgresServer {
    /// A new cluster, started and answering.
    pub fn start() -> PostgresServer {
        Self::create(false, None)
    }

    /// A new cluster whose TCP connections authenticate with a password
    /// (`scram-sha-256`): the `weir` user's is `password`.
    pub fn start_with_password(password: &str) -> PostgresServer {
        Self::create(false, Some(password))
    }

    /// A new cluster that accepts TCP connections over TLS only (its
    /// `pg_hba.conf` has a `hostssl` line and no `host` one), with a
    /// certificate for 127.0.0.1 issued by a CA made for it ([`Self::ca_file`]).
    /// Needs `openssl`.
    pub fn start_tls() -> PostgresServer {
        Self::create(true, None)
    }

    /// The CA that issued a TLS cluster's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn create(tls: bool, password: Option<&str>) -> PostgresServer {
        // As root the server runs as `postgres`, which must reach the folder:
        // under /tmp, whatever TMPDIR says (it may be under root's home).
        let dir = match as_root() {
            true => tempfile::tempdir_in("/tmp"),
            false => tempfile::tempdir(),
        }
        .expect("a temporary folder for the cluster");
        let mut server =
            PostgresServer { port: free_port(), dir, running: false, password: password.map(str::to_owned) };
        let password_file = server.dir.path().join("password");
        if let Some(password) = password {
            std::fs::write(&password_file, password).expect("the password file");
        }
        server.give_to_postgres();
        let data = server.data();
        let initdb = ["-U", "weir", "--auth=trust", "-E", "UTF8", "--no-sync"];
        let mut command = server.command("initdb");
        command.arg("-D").arg(&data).args(initdb);
        if password.is_some() {
            command.arg("--auth-host=scram-sha-256").arg(format!("--pwfile={}", password_file.display()));
        }
        run(&mut command);
        if tls {
            server.configure_tls();
            server.give_to_postgres();
        }
        server.resume();
        server
    }

    /// As root, the folder and everything in it belong to the `postgres` user.
    fn give_to_postgres(&self) {
        if as_root() {
            run(Command::new("chown").args(["-R", "postgres:postgres"]).arg(self.dir.path()));
        }
    }

    /// A CA, a server certificate for 127.0.0.1 it signs, `ssl = on`, and TLS-only TCP.
    fn configure_tls(&self) {
        let dir = self.dir.path();
        let file = |name: &str| dir.join(name).display().to_string();
        let openssl = |args: &[&str]| run(Command::new("openssl").args(args));
        let (ca_key, ca, key, csr, crt, ext) = (
            file("ca.key"),
            file("ca.pem"),
            file("server.key"),
            file("server.csr"),
            file("server.crt"),
            file("san.ext"),
        );
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=weir test CA",
            "-keyout",
            &ca_key,
            "-out",
            &ca,
        ]);
        openssl(&["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", &key, "-out", &csr]);
        std::fs::write(&ext, "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n").expect("the extensions");
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &crt,
        ]);
        run(Command::new("chmod").args(["600", &key]));
        let conf = self.data().join("postgresql.conf");
        let mut settings = std::fs::read_to_string(&conf).expect("postgresql.conf");
        settings.push_str(&format!("\nssl = on\nssl_cert_file = '{crt}'\nssl_key_file = '{key}'\n"));
        std::fs::write(&conf, settings).expect("postgresql.conf");
        let hba = "local all all trust\nhostssl all all 127.0.0.1/32 trust\n";
        std::fs::write(self.data().join("pg_hba.conf"), hba).expect("pg_hba.conf");
    }

    /// The URL a gateway is configured with.
    pub fn url(&self) -> String {
        match &self.password {
            Some(password) => format!(
                "postgres://weir:{}@127.0.0.1:{}/postgres",
                crate::redis_server::percent_escaped(password),
                self.port
            ),
            None => format!("postgres://weir@127.0.0.1:{}/postgres", self.port),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
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
