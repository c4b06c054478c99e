//! `PcapTap`: a link that records every packet passing through another link in a pcap file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fastpath::buf::PacketBuf;
use fastpath::link::{Link, LinkCapabilities, Medium};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;

/// How often buffered records are pushed to the file, so it can be read while the tap runs.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Wraps a link and writes each packet it receives (after the inner link hands it over) and each packet
/// it is asked to transmit (before the inner link takes it) to a pcap file, link type raw IP (101) or Ethernet (1) by the link's medium, whole
/// packets. Packets are recorded as they cross the link: one sent with its checksum offloaded carries
/// the pseudo-header sum in its checksum field, as a capture on a Linux host shows it.
pub struct PcapTap<L: Link> {
    inner: L,
    writer: Option<PcapWriter<TimedFlush>>,
    written: Arc<AtomicU64>,
}

/// A buffered file that also flushes whenever [`FLUSH_EVERY`] has passed since its last flush.
struct TimedFlush {
    file: BufWriter<File>,
    last_flush: Instant,
}

impl Write for TimedFlush {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        if self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.last_flush = Instant::now();
        self.file.flush()
    }
}

impl<L: Link> PcapTap<L> {
    /// Records the traffic of `inner` in a new file at `path`.
    pub fn create(inner: L, path: &Path) -> io::Result<PcapTap<L>> {
        let file = File::create(path)?;
        let header = PcapHeader {
            // Frames on a link that carries them (TAP, AF_XDP), bare IP packets otherwise.
            datalink: match inner.medium() {
                Medium::Ip => DataLink::RAW,
                Medium::Ethernet(_) => DataLink::ETHERNET,
            },
            snaplen: 65535,
            ..PcapHeader::default()
        };
        let file = TimedFlush {
            file: BufWriter::new(file),
            last_flush: Instant::now(),
        };
        let writer =
            PcapWriter::with_header(file, header).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(PcapTap {
            inner,
            writer: Some(writer),
            written: Arc::new(AtomicU64::new(0)),
        })
    }

    /// A counter of the packets recorded so far, readable after the tap has been given to a stack.
    pub fn written(&self) -> Arc<AtomicU64> {
        self.written.clone()
    }

    fn record<'a>(&mut self, packets: impl Iterator<Item = &'a PacketBuf>) {
        let Some(writer) = &mut self.writer else {
            return;
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut n = 0;
        for p in packets {
            let data = p.data();
            if let Err(e) = writer.write_packet(&PcapPacket::new(now, data.len() as u32, data)) {
                eprintln!("fastpath: pcap: {e}; recording stops");
                self.writer = None;
                return;
            }
            n += 1;
        }
        self.written.fetch_add(n, Ordering::Relaxed);
    }
}

impl<L: Link> Drop for PcapTap<L> {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            if let Err(e) = writer.into_writer().flush() {
                eprintln!("fastpath: pcap: {e}");
            }
        }
    }
}

impl<L: Link> Link for PcapTap<L> {
    fn capabilities(&self) -> LinkCapabilities {
        self.inner.capabilities()
    }

    fn medium(&self) -> Medium {
        self.inner.medium()
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        // Recorded before the inner link consumes them (a packet it then drops is still recorded, as
        // a capture on the sending host would show it).
        self.record(batch.iter());
        self.inner.transmit(batch)
    }

    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        let before = batch.len();
        let n = self.inner.receive(batch, max);
        if batch.len() > before {
            self.record(batch[before..].iter());
        }
        n
    }
}
