//! memcached's text protocol, spoken to one pod.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A plain text-protocol session with one pod's memcached.
pub struct Memcache {
    reader: BufReader<TcpStream>,
}

impl Memcache {
    /// Connect to port 11211 of `ip`.
    pub fn connect(ip: &str) -> Result<Self, String> {
        let stream = TcpStream::connect((ip, 11211)).map_err(|e| format!("{ip}:11211: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        Ok(Memcache {
            reader: BufReader::new(stream),
        })
    }

    /// Send `command` and read lines up to the one equal to `last`.
    pub fn command(&mut self, command: &str, last: &str) -> Result<Vec<String>, String> {
        self.send(command)?;
        let mut lines = Vec::new();
        loop {
            let line = self
                .read_line()
                .map_err(|e| format!("{e} after {lines:?}"))?;
            if line == last {
                return Ok(lines);
            }
            lines.push(line);
        }
    }

    /// Send `command` and read its one-line reply.
    pub fn reply(&mut self, command: &str) -> Result<String, String> {
        self.send(command)?;
        self.read_line()
    }

    fn send(&mut self, command: &str) -> Result<(), String> {
        self.reader
            .get_mut()
            .write_all(command.as_bytes())
            .map_err(|e| e.to_string())
    }

    fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err("connection closed".to_string()),
            Ok(_) => Ok(line.trim_end().to_string()),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Memcache {
    /// [`Memcache::connect`], then memcached's ASCII authentication (`-Y`)
    /// as `user` with `password`.
    pub fn login(ip: &str, user: &str, password: &str) -> Result<Self, String> {
        let mut session = Memcache::connect(ip)?;
        let token = format!("{user} {password}");
        let answer = session.reply(&format!("set auth 0 0 {}\r\n{token}\r\n", token.len()))?;
        if answer == "STORED" {
            Ok(session)
        } else {
            Err(format!("{ip}:11211 refused {user}: {answer}"))
        }
    }

    /// `stats <group>` (`""` for the general ones, `"settings"`), by name.
    pub fn stats(&mut self, group: &str) -> Result<BTreeMap<String, String>, String> {
        let command = format!("stats {group}").trim_end().to_string() + "\r\n";
        let lines = self.command(&command, "END")?;
        Ok(lines
            .iter()
            .filter_map(|line| {
                let mut fields = line.splitn(3, ' ').skip(1);
                Some((fields.next()?.to_string(), fields.next()?.to_string()))
            })
            .collect())
    }

    /// Read keys `key-0` .. `key-<count - 1>` as an application with a
    /// read-through cache does: each miss is set again. The hits.
    pub fn read_through(&mut self, count: usize) -> Result<usize, String> {
        let mut hits = 0;
        for i in 0..count {
            let found = self.command(&format!("get key-{i}\r\n"), "END")?;
            if found.is_empty() {
                self.command(&format!("set key-{i} 0 0 5\r\nvalue\r\n"), "STORED")?;
            } else {
                hits += 1;
            }
        }
        Ok(hits)
    }

    /// How many of the keys `key-0` .. `key-<count - 1>` memcached serves
    /// (read in gets of 100 keys; nothing is set).
    pub fn held(&mut self, count: usize) -> Result<usize, String> {
        let mut held = 0;
        for first in (0..count).step_by(100) {
            let keys: Vec<String> = (first..count.min(first + 100))
                .map(|i| format!("key-{i}"))
                .collect();
            let lines = self.command(&format!("get {}\r\n", keys.join(" ")), "END")?;
            held += lines.iter().filter(|l| l.starts_with("VALUE ")).count();
        }
        Ok(held)
    }

    /// Set `count` keys (noreply, then one `mn` to wait for them).
    pub fn fill(&mut self, count: usize) -> Result<(), String> {
        let mut text = String::new();
        for i in 0..count {
            text.push_str(&format!("set key-{i} 0 0 5 noreply\r\nvalue\r\n"));
        }
        text.push_str("mn\r\n");
        match self.reply(&text)?.as_str() {
            "MN" => Ok(()),
            answer => Err(format!("answer to mn: {answer:?}")),
        }
    }
}

/// The memcached at `ip` answers `version` with `VERSION <version>`.
pub fn memcached_version(ip: &str) -> Result<String, String> {
    let reply = Memcache::connect(ip)?.reply("version\r\n")?;
    reply
        .strip_prefix("VERSION ")
        .map(str::to_string)
        .ok_or_else(|| format!("{ip}:11211 answered `version` with {reply:?}"))
}

/// One `stats` value from the memcached at `ip`.
pub fn memcached_stat(ip: &str, name: &str) -> Result<String, String> {
    let lines = Memcache::connect(ip)?.command("stats\r\n", "END")?;
    lines
        .iter()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")).map(str::to_string))
        .ok_or_else(|| format!("no stat {name}"))
}
