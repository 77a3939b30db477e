// wflsim_lte.cc -- the LTE uplink of wflsim (a Python co-simulator of wireless federated
// learning), played packet by packet by ns-3 3.37 (LENA LTE + EPC).
//
// Build (Debian libns3-dev 3.37):
//   g++ -std=c++17 -O2 wflsim_lte.cc -o wflsim-lte $(pkg-config --cflags --libs ns3-lte
//       ns3-internet ns3-applications ns3-point-to-point ns3-mobility ns3-propagation
//       ns3-spectrum ns3-network ns3-core)
//
// The program is driven over stdin/stdout by a line protocol (its Python side, and the
// protocol's description: wflsim/sim/radio/ns3/process.py):
// configuration (`config`, `band`, `attach`), `ready` (build + warm-up), then timed commands
// (`gains`, `power`, `start`, `stop`, `run`, `inflight`) whose times are integer nanoseconds
// relative to the end of the warm-up, and `quit`.  One reply per command, ending with a line
// `ok ...` or `error <message>`.  Diagnostics go to stderr.  To make sure nothing but replies
// ever reaches stdout, file descriptor 1 is re-pointed at stderr at start-up and the replies
// are written to a private duplicate of the original stdout.
//
// What is modelled, in short:
//   * C eNBs, N UEs, an EPC (PointToPointEpcHelper) and one remote host (the FL server) behind
//     the PGW over a 100 Gb/s point-to-point link with a configurable one-way delay.
//   * The radio channel of every UE-eNB pair is one number: a loss in dB, held by a
//     MatrixPropagationLossModel on the uplink AND on the downlink spectrum channel (the same
//     value on both, symmetric).  No fading model: wflsim's gains already contain the fading.
//   * Uplink power control off: each UE transmits at the power wflsim gives it.
//   * eNB uplink noise figure chosen by wflsim so that ns-3's kTF equals wflsim's N0/W.
//   * eNBs with the same band index share one carrier (and interfere); different band
//     indices get disjoint carriers.
//   * Uploads are TCP connections (one per upload) or paced UDP flows with a sequence header;
//     the server counts application bytes per upload and reports when the last one arrived.
//
// Choices worth knowing (details at the code that implements them):
//   * RLC AM on every data bearer, 256 KiB transmission buffer, t-StatusProhibit 40 ms,
//     retransmissions allowed into any grant; TCP send/receive buffers 1 MiB (Build()).
//   * `run <t>`: every event before t is processed, nothing after t; events AT t are processed
//     if they were scheduled before the `run` command arrived (the stop event is inserted at
//     t when the command arrives and ns-3 runs same-time events in insertion order), those
//     created later are left for the next `run` (CmdRun()).
//   * HARQ retransmissions are recognised by m_ndi == 0 in the eNB's UL PHY reception trace
//     (OnUlPhyReception()).
//   * Extensions, not needed by wflsim: `gains 0 ...` and `power 0 ...` before `ready` (the
//     warm-up then runs with those values, which stay in force at the origin); config keys
//     warmup_loss_db, rlc, rlc_buffer, rlc_status_prohibit_ms, tcp_buffer, srs_period_ms,
//     udp_repair_ms; diagnostic commands `ulpeak <nrb>` and `serverbytes <ue>`.

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/lte-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/propagation-module.h"
#include "ns3/spectrum-module.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace ns3;

namespace
{

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

const double kDeadLossDb = 1000.0;       // loss of a link that is "not set" (dead)
const double kMaxDeliveredLossDb = 500.0; // channels drop signals with a larger loss altogether
const uint16_t kTcpPort = 5000;          // FL server: TCP uploads
const uint16_t kUdpPort = 6000;          // FL server: UDP uploads
const uint32_t kUdpHeader = 8;           // UDP upload header: upload serial (4 B) + seq (4 B)

// ---------------------------------------------------------------------------------------------
// Configuration (the `config`, `band`, `attach` commands)
// ---------------------------------------------------------------------------------------------

struct Settings
{
    int ues = 0;                // N (required)
    int enbs = 1;               // C
    int rbs = 50;               // UL and DL bandwidth in resource blocks
    uint32_t seed = 1;          // RngSeedManager::SetSeed
    uint64_t run = 0;           // RngSeedManager::SetRun
    bool tcp = true;            // transport: tcp | udp
    double noiseFigureDb = 5.0; // eNB uplink noise figure (may be negative)
    int64_t warmupMs = 200;     // warm-up before the time origin
    int64_t backhaulUs = 1000;  // PGW <-> server one-way delay
    uint32_t tcpSegment = 1400; // TCP MSS (bytes)
    uint32_t udpPacket = 1400;  // UDP payload per datagram, including the 8-byte header
    double udpRateBps = 100e6;  // UDP constant bit rate (UDP payload bits per second)
    bool rr = false;            // scheduler: pf (default) | rr
    // Extensions (documented in the report; not needed by wflsim):
    double warmupLossDb = 80.0;   // serving-link loss during the warm-up if no early `gains`
    bool rlcAm = true;            // rlc=am|um   (RLC mode of every data radio bearer)
    uint32_t rlcBuffer = 1 << 18; // rlc_buffer: RLC transmission buffer (bytes, 0 = unlimited)
    uint32_t tcpBuffer = 1 << 20; // tcp_buffer: TCP send and receive buffers (bytes)
    int srsPeriodMs = 0;          // srs_period_ms: 0 = automatic
    int64_t statusProhibitMs = 40; // rlc_status_prohibit_ms: RLC AM t-StatusProhibit
    int64_t udpRepairMs = 1000;   // udp_repair_ms: resend missing datagrams after a stall
};

// ---------------------------------------------------------------------------------------------
// Per-upload bookkeeping
// ---------------------------------------------------------------------------------------------

// Statistics of one upload, from its start to its end (or stop).
struct Stats
{
    uint64_t tbs = 0;      // UL TBs of the UE received by its eNB (incl. HARQ retx)
    uint64_t retx = 0;     // of those, HARQ retransmissions (m_ndi == 0)
    uint64_t tbErrors = 0; // of those, received in error (m_correctness == 0)
    uint64_t mcsSum = 0;   // sum of their MCS
    uint64_t rbTtis = 0;   // UL grants (TTIs) of the UE
    uint64_t rbSum = 0;    // sum of the RBs of those grants
    uint64_t tbBytes = 0;  // sum of the TB sizes, first transmissions only
};

struct Upload
{
    int ue = -1;
    uint64_t size = 0;      // application bytes to deliver
    int64_t startNs = 0;    // relative to the origin
    bool active = true;     // false once completed or stopped
    bool completed = false; // every byte reached the server
    int64_t endNs = -1;
    uint64_t delivered = 0; // distinct application bytes at the server
    Stats st;
    double lossDb = 0.0; // applied loss UE -> serving eNB at the start
    double txDbm = 0.0;  // UE transmit power at the start
    Ptr<Socket> sock;    // client socket on the UE
    // TCP sender
    uint64_t queued = 0; // bytes handed to the socket
    bool closed = false;
    // UDP sender (see UdpSend)
    uint32_t npkts = 0;
    uint32_t nextSeq = 0;       // next sequence number of the first pass
    std::vector<uint8_t> got;   // server side: datagrams received
    std::deque<uint32_t> resend; // sequence numbers to send again after a stall
    uint64_t outstanding = 0;    // RLC bytes of the datagrams sent and not (yet) delivered
    bool blocked = false;        // paused by the flow-control window
    bool firstPassDone = false;
    Time paceOrigin;          // pacing: datagram k leaves at paceOrigin + pacedBytes*8/rate
    uint64_t pacedBytes = 0;
    Time lastProgress;        // last time the server got a new datagram
    EventId sendEv;
    EventId repairEv;
};

struct UeState
{
    int enb = -1;                // serving eNB (attach)
    bool online = true;          // false between `stop` and the next `start`
    std::vector<double> loss;    // last commanded losses to every eNB (dB)
    int current = -1;            // upload in flight (index into g.uploads) or -1
    int pendingStarts = 0;       // `start`s scheduled in the future
    uint16_t rnti = 0;
    uint16_t cellId = 0;
    uint64_t serverBytes = 0;    // every byte the server got from this UE (diagnostic)
};

// ---------------------------------------------------------------------------------------------
// Global program state
// ---------------------------------------------------------------------------------------------

struct Program
{
    Settings cfg;
    bool uesGiven = false;
    std::vector<int> band;   // band index per eNB
    std::vector<int> attach; // serving eNB per UE
    std::vector<double> earlyGains; // `gains 0 ...` before `ready` (warm-up losses)
    std::vector<std::pair<int, double>> earlyPower; // `power 0 ...` before `ready`
    bool ready = false;
    Time origin; // ns-3 time of the protocol's t = 0

    Ptr<LteHelper> lte;
    Ptr<PointToPointEpcHelper> epc;
    NodeContainer enbNodes, ueNodes;
    Ptr<Node> server;
    NetDeviceContainer enbDevs, ueDevs;
    std::vector<Ptr<MobilityModel>> enbMob, ueMob;
    std::vector<Ptr<LteUePhy>> uePhy;
    std::vector<Ipv4Address> ueAddr;
    Ipv4Address serverAddr;
    Ptr<MatrixPropagationLossModel> ulLoss, dlLoss;
    Ptr<Socket> tcpListen, udpServer;

    std::vector<UeState> ue;
    std::deque<Upload> uploads; // every upload ever started (a deque: references stay valid)
    std::map<uint32_t, int> rntiToUe;                  // (cellId << 16 | rnti) -> UE
    std::map<std::pair<uint32_t, uint16_t>, int> tcpConn; // (UE address, port) -> upload
    std::map<uint32_t, int> addrToUe;                  // UE address -> UE
    std::deque<int> completedUnreported;               // uploads finished, `end` not sent yet
    bool stopOnEnd = true; // `run` stops at the first completion; `runall` does not

    FILE* out = nullptr;
};

Program g;

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

int64_t
NowNs()
{
    return (Simulator::Now() - g.origin).GetNanoSeconds();
}

void
StopNow()
{
    Simulator::Stop();
}

// Floats with 17 significant digits (exact round trip), "nan" for not-a-number.
std::string
Fmt(double v)
{
    if (std::isnan(v))
    {
        return "nan";
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return buf;
}

void
Reply(const std::string& line)
{
    std::fputs(line.c_str(), g.out);
    std::fputc('\n', g.out);
}

void
ReplyOk(const std::string& rest = "")
{
    Reply(rest.empty() ? "ok" : "ok " + rest);
    std::fflush(g.out);
}

void
ReplyError(const std::string& msg)
{
    std::string m = msg;
    for (char& c : m)
    {
        if (c == '\n' || c == '\r')
        {
            c = ' ';
        }
    }
    Reply("error " + m);
    std::fflush(g.out);
}

bool
ParseInt(const std::string& s, int64_t& v)
{
    if (s.empty())
    {
        return false;
    }
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0')
    {
        return false;
    }
    v = x;
    return true;
}

bool
ParseDouble(const std::string& s, double& v)
{
    if (s.empty())
    {
        return false;
    }
    char* end = nullptr;
    errno = 0;
    double x = std::strtod(s.c_str(), &end);
    if (errno == ERANGE && std::isfinite(x) && x != 0.0)
    {
        return false;
    }
    if (*end != '\0')
    {
        return false;
    }
    v = x;
    return true;
}

// A time stamp of the protocol: integer nanoseconds >= 0.
bool
ParseTime(const std::string& s, int64_t& t, std::string& err)
{
    if (!ParseInt(s, t) || t < 0)
    {
        err = "bad time '" + s + "'";
        return false;
    }
    return true;
}

std::string
StatsString(const Upload& u)
{
    std::ostringstream os;
    const Stats& s = u.st;
    double mcsMean = s.tbs ? double(s.mcsSum) / double(s.tbs) : std::nan("");
    double rbMean = s.rbTtis ? double(s.rbSum) / double(s.rbTtis) : std::nan("");
    os << u.delivered << ' ' << s.tbs << ' ' << s.retx << ' ' << s.tbErrors << ' '
       << Fmt(mcsMean) << ' ' << Fmt(rbMean) << ' ' << s.tbBytes << ' ' << Fmt(u.lossDb) << ' '
       << Fmt(u.txDbm);
    return os.str();
}

// ---------------------------------------------------------------------------------------------
// Carriers: band index -> UL EARFCN (DL EARFCN = UL - 18000)
// ---------------------------------------------------------------------------------------------
//
// Carriers are packed side by side, one LTE channel bandwidth apart, inside FDD bands whose
// uplink ranges are disjoint and whose downlink ranges are disjoint (bands 1, 2, 3, 5, 7, 8 of
// ns-3's EARFCN table; bands 4 and 6 are skipped because they overlap bands 1/3 and 5 in
// frequency).  Band index 0 gets ns-3's default carrier (UL 18100, DL 100).  Different band
// indices therefore never share a single hertz, on the uplink or on the downlink.

struct FddBand
{
    uint32_t ulLow;  // first UL EARFCN usable for packing
    uint32_t ulHigh; // last UL EARFCN of the band
};

// Channel bandwidth in units of 100 kHz (one EARFCN step) for a number of resource blocks.
uint32_t
ChannelUnits(int rbs)
{
    switch (rbs)
    {
    case 6:
        return 14;
    case 15:
        return 30;
    case 25:
        return 50;
    case 50:
        return 100;
    case 75:
        return 150;
    default:
        return 200;
    }
}

bool
CarrierOfBand(int bandIndex, int rbs, uint32_t& ulEarfcn)
{
    const uint32_t units = ChannelUnits(rbs);
    const FddBand bands[] = {
        {18100 - units / 2, 18599}, // band 1 (first carrier centred on 18100)
        {18600, 19199},             // band 2
        {19200, 19949},             // band 3
        {20400, 20649},             // band 5
        {20750, 21449},             // band 7
        {21450, 21799},             // band 8
    };
    int k = bandIndex;
    for (const FddBand& b : bands)
    {
        int n = int((b.ulHigh - b.ulLow + 1) / units);
        if (k < n)
        {
            ulEarfcn = b.ulLow + uint32_t(k) * units + units / 2;
            return true;
        }
        k -= n;
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Propagation: the loss matrix
// ---------------------------------------------------------------------------------------------

// Sets the loss of one UE-eNB pair on the uplink and on the downlink channel (symmetric).
void
SetLink(int ue, int enb, double lossDb)
{
    g.ulLoss->SetLoss(g.ueMob[ue], g.enbMob[enb], lossDb, true);
    g.dlLoss->SetLoss(g.ueMob[ue], g.enbMob[enb], lossDb, true);
}

void
ApplyUeLosses(int ue)
{
    for (int c = 0; c < g.cfg.enbs; ++c)
    {
        SetLink(ue, c, g.ue[ue].online ? g.ue[ue].loss[c] : kDeadLossDb);
    }
}

// The loss ns-3 applies on the UE's uplink to its serving eNB, read back from the model.
double
AppliedUlLoss(int ue)
{
    return -g.ulLoss->CalcRxPower(0.0, g.ueMob[ue], g.enbMob[g.ue[ue].enb]);
}

// Effect of `gains`: remember the row of every UE; apply it to the UEs that are online.
void
ApplyGains(std::vector<double> losses)
{
    const int C = g.cfg.enbs;
    for (int u = 0; u < g.cfg.ues; ++u)
    {
        for (int c = 0; c < C; ++c)
        {
            g.ue[u].loss[c] = losses[size_t(u) * C + c];
        }
        if (g.ue[u].online)
        {
            ApplyUeLosses(u);
        }
    }
}

void
ApplyPower(int ue, double dbm)
{
    g.uePhy[ue]->SetTxPower(dbm);
}

// ---------------------------------------------------------------------------------------------
// PHY traces -> per-upload statistics
// ---------------------------------------------------------------------------------------------

Upload*
ActiveUploadOf(int ue)
{
    int id = g.ue[ue].current;
    if (id < 0)
    {
        return nullptr;
    }
    Upload& u = g.uploads[id];
    return u.active ? &u : nullptr;
}

// eNB uplink spectrum phy: one call per UL transport block (first transmissions and HARQ
// retransmissions).  Note: a grant the UE leaves unused (ns-3's RLC AM reports data sent but
// not yet acknowledged as buffered, so the eNB keeps granting a UE whose new data ran out) is
// reported too (when another UE of the cell transmitted in that TTI), as a TB received in
// error that is never retransmitted.
// In ns-3 3.37 the eNB fills m_ndi from the UL DCI (1 = new data, 0 = HARQ retransmission)
// and overwrites m_rv with the length of the HARQ history, which is non-zero only when
// m_ndi == 0; we recognise retransmissions by m_ndi == 0.
void
OnUlPhyReception(PhyReceptionStatParameters p)
{
    auto it = g.rntiToUe.find((uint32_t(p.m_cellId) << 16) | p.m_rnti);
    if (it == g.rntiToUe.end())
    {
        return;
    }
    Upload* u = ActiveUploadOf(it->second);
    if (!u)
    {
        return;
    }
    u->st.tbs++;
    u->st.mcsSum += p.m_mcs;
    if (p.m_ndi == 0)
    {
        u->st.retx++;
    }
    else
    {
        u->st.tbBytes += p.m_size;
    }
    if (p.m_correctness == 0)
    {
        u->st.tbErrors++;
    }
}

// UE phy: one call per UL grant (UL DCI) with the resource blocks of the grant.
void
OnUlResourceBlocks(int ue, uint16_t /*rnti*/, const std::vector<int>& rbs)
{
    Upload* u = ActiveUploadOf(ue);
    if (!u)
    {
        return;
    }
    u->st.rbTtis++;
    u->st.rbSum += rbs.size();
}

// ---------------------------------------------------------------------------------------------
// Server side: counting application bytes, detecting the end of an upload
// ---------------------------------------------------------------------------------------------

void UdpSend(int id);

void
Delivered(int id, uint64_t bytes)
{
    Upload& u = g.uploads[id];
    if (!u.active)
    {
        return; // stopped (or already complete): late bytes do not count
    }
    u.delivered += bytes;
    if (u.delivered >= u.size)
    {
        u.delivered = u.size;
        u.active = false;
        u.completed = true;
        u.endNs = NowNs();
        u.sendEv.Cancel();
        u.repairEv.Cancel();
        if (g.ue[u.ue].current == id)
        {
            g.ue[u.ue].current = -1;
        }
        g.completedUnreported.push_back(id);
        if (!g.cfg.tcp && u.sock)
        {
            u.sock->Close(); // UDP: release the port (a TCP client closes after its last byte)
        }
        // The last byte reached the server: end the current `run` after this event (not
        // during `runall`, which reports every completion up to its time).
        if (g.stopOnEnd)
        {
            Simulator::Stop();
        }
    }
}

void
OnTcpServerRecv(int id, int ue, Ptr<Socket> s)
{
    if (id < 0 || (!g.uploads[id].active && !g.uploads[id].completed))
    {
        // Data of a stopped upload (or of an unknown connection): it was queued in the UE
        // before the stop.  Close without reading it: ns-3 answers a close with unread data by
        // a reset, which aborts the stale client connection for good (otherwise its whole send
        // buffer would follow once the UE is back online).
        if (ue >= 0)
        {
            g.ue[ue].serverBytes += s->GetRxAvailable();
        }
        s->SetRecvCallback(MakeNullCallback<void, Ptr<Socket>>());
        s->SetCloseCallbacks(MakeNullCallback<void, Ptr<Socket>>(),
                             MakeNullCallback<void, Ptr<Socket>>());
        s->Close();
        return;
    }
    Ptr<Packet> p;
    Address from;
    while ((p = s->RecvFrom(from)))
    {
        if (ue >= 0)
        {
            g.ue[ue].serverBytes += p->GetSize();
        }
        Delivered(id, p->GetSize());
    }
}

// The client closed (FIN after its last byte): close our side too.
void
OnTcpServerClosed(Ptr<Socket> s)
{
    s->SetCloseCallbacks(MakeNullCallback<void, Ptr<Socket>>(),
                         MakeNullCallback<void, Ptr<Socket>>());
    s->Close();
}

void
OnTcpAccept(Ptr<Socket> s, const Address& from)
{
    int id = -1;
    int ue = -1;
    if (InetSocketAddress::IsMatchingType(from))
    {
        InetSocketAddress a = InetSocketAddress::ConvertFrom(from);
        auto it = g.tcpConn.find({a.GetIpv4().Get(), a.GetPort()});
        if (it != g.tcpConn.end())
        {
            id = it->second;
        }
        auto u = g.addrToUe.find(a.GetIpv4().Get());
        if (u != g.addrToUe.end())
        {
            ue = u->second;
        }
    }
    s->SetRecvCallback(MakeBoundCallback(&OnTcpServerRecv, id, ue));
    s->SetCloseCallbacks(MakeCallback(&OnTcpServerClosed), MakeNullCallback<void, Ptr<Socket>>());
}

uint32_t
UdpAppBytes(const Upload& u, uint32_t seq)
{
    const uint64_t per = g.cfg.udpPacket - kUdpHeader;
    const uint64_t off = uint64_t(seq) * per;
    return uint32_t(std::min<uint64_t>(per, u.size - off));
}

uint32_t UdpSduBytes(const Upload& u, uint32_t seq);

void
OnUdpServerRecv(Ptr<Socket> s)
{
    Ptr<Packet> p;
    Address from;
    while ((p = s->RecvFrom(from)))
    {
        if (InetSocketAddress::IsMatchingType(from))
        {
            auto a = g.addrToUe.find(InetSocketAddress::ConvertFrom(from).GetIpv4().Get());
            if (a != g.addrToUe.end())
            {
                g.ue[a->second].serverBytes += p->GetSize();
            }
        }
        if (p->GetSize() < kUdpHeader)
        {
            continue;
        }
        uint8_t h[kUdpHeader];
        p->CopyData(h, kUdpHeader);
        uint32_t serial = (uint32_t(h[0]) << 24) | (uint32_t(h[1]) << 16) |
                          (uint32_t(h[2]) << 8) | uint32_t(h[3]);
        uint32_t seq = (uint32_t(h[4]) << 24) | (uint32_t(h[5]) << 16) | (uint32_t(h[6]) << 8) |
                       uint32_t(h[7]);
        if (serial >= g.uploads.size())
        {
            continue;
        }
        Upload& u = g.uploads[serial];
        if (!u.active || seq >= u.npkts || u.got[seq])
        {
            continue; // stale, duplicate or foreign: counts once only
        }
        u.got[seq] = 1;
        const uint32_t app = UdpAppBytes(u, seq);
        const uint32_t sdu = UdpSduBytes(u, seq);
        u.outstanding = u.outstanding > sdu ? u.outstanding - sdu : 0;
        u.lastProgress = Simulator::Now();
        int id = int(serial);
        Delivered(id, app);
        Upload& v = g.uploads[id];
        if (v.active && v.blocked)
        {
            // The flow-control window opened again: resume pacing from now.
            v.blocked = false;
            v.paceOrigin = Simulator::Now();
            v.pacedBytes = 0;
            v.sendEv = Simulator::ScheduleNow(&UdpSend, id);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Client side: TCP
// ---------------------------------------------------------------------------------------------

// Hands the socket as many bytes as its send buffer takes; closes after the last one.
void
TcpFill(int id)
{
    Upload& u = g.uploads[id];
    if (!u.active || u.closed || !u.sock)
    {
        return;
    }
    while (u.queued < u.size)
    {
        uint32_t room = u.sock->GetTxAvailable();
        if (room == 0)
        {
            return;
        }
        uint32_t n = uint32_t(std::min<uint64_t>({u.size - u.queued, room, 65536}));
        int sent = u.sock->Send(Create<Packet>(n));
        if (sent <= 0)
        {
            return;
        }
        u.queued += uint64_t(sent);
    }
    u.closed = true;
    u.sock->Close(); // FIN after the last byte
}

void
OnTcpConnected(int id, Ptr<Socket>)
{
    TcpFill(id);
}

void OpenClient(int id);

// The SYN retries ran out (e.g. the UE's links were dead for a long time): try again with a
// fresh connection for as long as the upload is in flight.
void
OnTcpConnectFailed(int id, Ptr<Socket>)
{
    Upload& u = g.uploads[id];
    std::cerr << "wflsim-lte: TCP connect failed for upload " << id << " of UE " << u.ue
              << (u.active ? "; retrying" : "") << std::endl;
    if (u.active && !u.closed)
    {
        Simulator::ScheduleNow(&OpenClient, id);
    }
}

void
OnTcpSendSpace(int id, Ptr<Socket>, uint32_t)
{
    TcpFill(id);
}

void
OnTcpClientClosed(int, Ptr<Socket>)
{
}

// TCP gave up (DataRetries exhausted after a very long outage): the upload cannot complete.
void
OnTcpClientError(int id, Ptr<Socket>)
{
    const Upload& u = g.uploads[id];
    if (u.active)
    {
        std::cerr << "wflsim-lte: TCP connection of upload " << id << " of UE " << u.ue
                  << " aborted by ns-3 after " << u.delivered << " bytes" << std::endl;
    }
}

// ---------------------------------------------------------------------------------------------
// Client side: UDP
// ---------------------------------------------------------------------------------------------
//
// Datagram k carries the 8-byte header (upload serial, k; big endian) and the application
// bytes [k*(P-8), (k+1)*(P-8)) of the upload, P = udp_packet (the last one may be short).
// Datagrams leave at a constant bit rate udp_rate_bps (counting the UDP payload).  So that the
// sender does not overflow the UE's RLC buffer uselessly when the rate exceeds what the link
// carries, it pauses while the datagrams sent and not yet delivered would occupy more than
// half of the RLC buffer (counting their RLC SDU size: payload + 8 UDP + 20 IP + 2 PDCP bytes;
// idealised zero-delay feedback from the server, which lives in the same process).  Half, so
// that even the stale datagrams of a stopped upload still queued in the UE plus the window of
// the next upload fit.  With RLC AM nothing is lost on the radio; should a datagram be lost
// anyway, the sender resends the missing ones after udp_repair_ms without progress.

const uint32_t kUdpSduOverhead = 8 + 20 + 2; // UDP + IPv4 + PDCP headers

uint64_t
UdpWindow()
{
    return g.cfg.rlcBuffer ? uint64_t(g.cfg.rlcBuffer) / 2 : (1u << 20);
}

// Bytes datagram seq occupies in the UE's RLC transmission buffer.
uint32_t
UdpSduBytes(const Upload& u, uint32_t seq)
{
    return UdpAppBytes(u, seq) + kUdpHeader + kUdpSduOverhead;
}

void UdpRepairCheck(int id);

void
UdpSend(int id)
{
    Upload& u = g.uploads[id];
    if (!u.active || !u.sock)
    {
        return;
    }
    // Pick the next datagram: first pass in order, then any to resend.
    int64_t seq = -1;
    if (u.nextSeq < u.npkts)
    {
        seq = u.nextSeq;
    }
    else
    {
        while (!u.resend.empty() && u.got[u.resend.front()])
        {
            u.resend.pop_front();
        }
        if (!u.resend.empty())
        {
            seq = u.resend.front();
        }
    }
    if (seq < 0)
    {
        // Everything sent once: watch for a stall.
        if (!u.firstPassDone)
        {
            u.firstPassDone = true;
            u.lastProgress = Simulator::Now();
        }
        if (!u.repairEv.IsRunning())
        {
            u.repairEv =
                Simulator::Schedule(MilliSeconds(g.cfg.udpRepairMs), &UdpRepairCheck, id);
        }
        return;
    }
    const uint32_t app = UdpAppBytes(u, uint32_t(seq));
    const uint32_t sdu = UdpSduBytes(u, uint32_t(seq));
    if (u.outstanding > 0 && u.outstanding + sdu > UdpWindow())
    {
        u.blocked = true; // resumed by the server (OnUdpServerRecv) or by UdpRepairCheck
        if (!u.repairEv.IsRunning())
        {
            u.repairEv =
                Simulator::Schedule(MilliSeconds(g.cfg.udpRepairMs), &UdpRepairCheck, id);
        }
        return;
    }
    if (uint64_t(seq) == u.nextSeq)
    {
        u.nextSeq++;
    }
    else
    {
        u.resend.pop_front();
    }
    std::vector<uint8_t> buf(kUdpHeader + app, 0);
    const uint32_t s = uint32_t(seq);
    const uint32_t serial = uint32_t(id);
    buf[0] = uint8_t(serial >> 24);
    buf[1] = uint8_t(serial >> 16);
    buf[2] = uint8_t(serial >> 8);
    buf[3] = uint8_t(serial);
    buf[4] = uint8_t(s >> 24);
    buf[5] = uint8_t(s >> 16);
    buf[6] = uint8_t(s >> 8);
    buf[7] = uint8_t(s);
    u.sock->Send(Create<Packet>(buf.data(), uint32_t(buf.size())));
    u.outstanding += sdu;
    u.pacedBytes += buf.size();
    // Next departure on the constant-bit-rate schedule.
    long double dtNs = (long double)u.pacedBytes * 8.0L * 1e9L / (long double)g.cfg.udpRateBps;
    Time next = u.paceOrigin + NanoSeconds(int64_t(std::ceil(dtNs)));
    Time delay = next > Simulator::Now() ? next - Simulator::Now() : Time(0);
    u.sendEv = Simulator::Schedule(delay, &UdpSend, id);
}

void
UdpRepairCheck(int id)
{
    Upload& u = g.uploads[id];
    if (!u.active)
    {
        return;
    }
    Time quiet = Simulator::Now() - u.lastProgress;
    if (quiet < MilliSeconds(g.cfg.udpRepairMs))
    {
        u.repairEv = Simulator::Schedule(MilliSeconds(g.cfg.udpRepairMs) - quiet,
                                         &UdpRepairCheck,
                                         id);
        return;
    }
    // No progress for udp_repair_ms: assume whatever is outstanding was lost.
    std::cerr << "wflsim-lte: UDP upload " << id << " of UE " << u.ue
              << " stalled; resending the missing datagrams" << std::endl;
    u.outstanding = 0;
    u.resend.clear();
    for (uint32_t k = 0; k < u.nextSeq; ++k)
    {
        if (!u.got[k])
        {
            u.resend.push_back(k);
        }
    }
    u.lastProgress = Simulator::Now();
    u.blocked = false;
    u.paceOrigin = Simulator::Now();
    u.pacedBytes = 0;
    u.sendEv.Cancel();
    u.sendEv = Simulator::ScheduleNow(&UdpSend, id);
}

// ---------------------------------------------------------------------------------------------
// Uploads: start and stop
// ---------------------------------------------------------------------------------------------

// Brings an offline UE back: its last commanded losses and its IP interface.
void
BringOnline(int ue)
{
    UeState& s = g.ue[ue];
    if (s.online)
    {
        return;
    }
    s.online = true;
    ApplyUeLosses(ue);
    Ptr<Node> node = g.ueNodes.Get(ue);
    Ptr<Ipv4> ipv4 = node->GetObject<Ipv4>();
    ipv4->SetUp(1);
    // Ipv4StaticRouting drops the routes of an interface that goes down: restore the default.
    Ipv4StaticRoutingHelper rh;
    rh.GetStaticRouting(ipv4)->SetDefaultRoute(g.epc->GetUeDefaultGatewayAddress(), 1);
}

// Opens the client socket of an upload (runs in the UE node's context).
void
OpenClient(int id)
{
    Upload& u = g.uploads[id];
    if (!u.active)
    {
        return;
    }
    Ptr<Node> node = g.ueNodes.Get(u.ue);
    if (g.cfg.tcp)
    {
        u.sock = Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
        u.sock->Bind();
        Address local;
        u.sock->GetSockName(local);
        uint16_t port = InetSocketAddress::ConvertFrom(local).GetPort();
        g.tcpConn[{g.ueAddr[u.ue].Get(), port}] = id;
        u.sock->SetConnectCallback(MakeBoundCallback(&OnTcpConnected, id),
                                   MakeBoundCallback(&OnTcpConnectFailed, id));
        u.sock->SetSendCallback(MakeBoundCallback(&OnTcpSendSpace, id));
        u.sock->SetCloseCallbacks(MakeBoundCallback(&OnTcpClientClosed, id),
                                  MakeBoundCallback(&OnTcpClientError, id));
        u.sock->Connect(InetSocketAddress(g.serverAddr, kTcpPort));
    }
    else
    {
        u.sock = Socket::CreateSocket(node, UdpSocketFactory::GetTypeId());
        u.sock->Bind();
        u.sock->Connect(InetSocketAddress(g.serverAddr, kUdpPort));
        u.paceOrigin = Simulator::Now();
        u.lastProgress = Simulator::Now();
        UdpSend(id);
    }
}

// Effect of `start` at its time: the upload record, the read-back of loss and power, and the
// client socket.
void
StartUpload(int ue, uint64_t bytes)
{
    UeState& s = g.ue[ue];
    if (s.pendingStarts > 0)
    {
        s.pendingStarts--;
    }
    if (s.current >= 0)
    {
        std::cerr << "wflsim-lte: UE " << ue << " still has an upload; start ignored"
                  << std::endl;
        return;
    }
    BringOnline(ue);
    Upload u;
    u.ue = ue;
    u.size = bytes;
    u.startNs = NowNs();
    u.lossDb = AppliedUlLoss(ue);
    u.txDbm = g.uePhy[ue]->GetTxPower();
    if (!g.cfg.tcp)
    {
        const uint64_t per = g.cfg.udpPacket - kUdpHeader;
        u.npkts = uint32_t((bytes + per - 1) / per);
        u.got.assign(u.npkts, 0);
    }
    int id = int(g.uploads.size());
    g.uploads.push_back(u);
    s.current = id;
    Simulator::ScheduleWithContext(g.ueNodes.Get(ue)->GetId(), Time(0), &OpenClient, id);
}

void
CloseClient(int id)
{
    Upload& u = g.uploads[id];
    u.sendEv.Cancel();
    u.repairEv.Cancel();
    if (u.sock)
    {
        u.sock->SetSendCallback(MakeNullCallback<void, Ptr<Socket>, uint32_t>());
        if (!u.closed)
        {
            u.closed = true;
            u.sock->Close();
        }
    }
}

// Effect of `stop`: the UE goes offline at once.  Its links become dead on both channels (so
// nothing it transmits reaches an eNB, not even as interference, and nothing reaches it), its
// IP interface goes down (nothing new enters its radio bearer), its sender closes, and the
// server no longer counts bytes of the upload.
void
StopUe(int ue)
{
    UeState& s = g.ue[ue];
    if (s.current >= 0)
    {
        int id = s.current;
        g.uploads[id].active = false;
        s.current = -1;
        Simulator::ScheduleWithContext(g.ueNodes.Get(ue)->GetId(), Time(0), &CloseClient, id);
    }
    if (s.online)
    {
        s.online = false;
        ApplyUeLosses(ue);
        g.ueNodes.Get(ue)->GetObject<Ipv4>()->SetDown(1);
    }
}

// ---------------------------------------------------------------------------------------------
// Building the scenario (`ready`)
// ---------------------------------------------------------------------------------------------

int
SrsPeriod(int uesPerCell)
{
    if (g.cfg.srsPeriodMs > 0)
    {
        return g.cfg.srsPeriodMs;
    }
    // Shortest valid SRS period with room for twice the UEs of the busiest cell (every random
    // access attempt takes an SRS slot until its context is released, and when the slots run
    // out ns-3 3.37's eNB hands the scheduler RNTI 0 and aborts), but at least 10 ms, so that
    // the UL CQI follows wflsim's gain changes quickly (ns-3's default is 40 ms).
    const int valid[] = {2, 5, 10, 20, 40, 80, 160, 320};
    for (int p : valid)
    {
        if (p >= 10 && p >= 2 * uesPerCell)
        {
            return p;
        }
    }
    return 320;
}

bool
Build(std::string& err)
{
    const Settings& c = g.cfg;
    const int N = c.ues;
    const int C = c.enbs;

    // Random streams: seed and run before anything is created.
    RngSeedManager::SetSeed(c.seed);
    RngSeedManager::SetRun(c.run);

    // --- defaults of the objects created below ---
    // eNB uplink receiver noise figure (kTF = wflsim's N0/W).
    Config::SetDefault("ns3::LteEnbPhy::NoiseFigure", DoubleValue(c.noiseFigureDb));
    // UEs transmit at the power wflsim sets; no closed-loop power control.
    Config::SetDefault("ns3::LteUePhy::EnableUplinkPowerControl", BooleanValue(false));
    // A UE whose links are dead (offline, or a deep fade in wflsim's gains) must stay
    // RRC-connected: wflsim decides connectivity, not ns-3's radio-link-failure procedure.
    Config::SetDefault("ns3::LteUePhy::EnableRlfDetection", BooleanValue(false));
    // RLC.  ns-3's default for EPC scenarios is RLC UM with a 10 KiB buffer: TCP bulk uploads
    // lose segments at that buffer and the window collapses (measured: 3.9 Mb/s instead of
    // ~33 Mb/s for one UE at 80 dB, 50 RBs).  We use RLC AM (ARQ below TCP/UDP: the radio
    // loses nothing, so UDP needs no retransmission of its own) with a transmission buffer of
    // rlc_buffer bytes, 256 KiB by default.  Measured (TCP, 1-5 UEs, 80..120 dB): any buffer
    // from 64 KiB to 1 MiB gives the same completion times within 0.1 %, AM and a large UM
    // buffer are within 3 %; 256 KiB bounds the queueing delay (and the stale data a stopped
    // UE leaves behind) while exceeding the bandwidth-delay product of a 40 Mb/s uplink at
    // 50 ms.  rlc=um selects UM (same buffer).
    Config::SetDefault("ns3::LteEnbRrc::EpsBearerToRlcMapping",
                       EnumValue(c.rlcAm ? LteEnbRrc::RLC_AM_ALWAYS : LteEnbRrc::RLC_UM_ALWAYS));
    Config::SetDefault("ns3::LteRlcAm::MaxTxBufferSize", UintegerValue(c.rlcBuffer));
    Config::SetDefault("ns3::LteRlcUm::MaxTxBufferSize", UintegerValue(c.rlcBuffer));
    // ns-3's RLC AM cannot re-segment: a PDU to retransmit that is larger than the current
    // grant (after the SINR or the number of UEs changed) would block the bearer for good.
    // Let such retransmissions through.
    Config::SetDefault("ns3::LteRlcAm::TxOpportunityForRetxAlwaysBigEnough", BooleanValue(true));
    // In ns-3 an RLC AM STATUS PDU always goes alone in a MAC PDU: every STATUS the UE sends
    // (to acknowledge the downlink TCP ACKs) wastes a whole uplink grant.  With the default
    // t-StatusProhibit of 10 ms that is one UL transport block in ten (TCP goodput -6..10%);
    // 40 ms (a standard value) brings it down to one in forty.
    Config::SetDefault("ns3::LteRlcAm::StatusProhibitTimer",
                       TimeValue(MilliSeconds(c.statusProhibitMs)));
    // SRS period (UL CQI refresh); it must hold every UE of a cell.
    std::vector<int> perCell(C, 0);
    for (int u = 0; u < N; ++u)
    {
        perCell[g.attach[u]]++;
    }
    int maxPerCell = 0;
    for (int n : perCell)
    {
        maxPerCell = std::max(maxPerCell, n);
    }
    const int srs = SrsPeriod(maxPerCell);
    if (srs < maxPerCell)
    {
        err = "srs_period_ms " + std::to_string(srs) + " too short for " +
              std::to_string(maxPerCell) + " UEs in one cell";
        return false;
    }
    Config::SetDefault("ns3::LteEnbRrc::SrsPeriodicity", UintegerValue(srs));
    // TCP: segment size and buffers.
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(c.tcpSegment));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(c.tcpBuffer));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(c.tcpBuffer));

    // --- LTE + EPC helpers ---
    g.lte = CreateObject<LteHelper>();
    g.epc = CreateObject<PointToPointEpcHelper>();
    g.lte->SetEpcHelper(g.epc);
    g.lte->SetSchedulerType(c.rr ? "ns3::RrFfMacScheduler" : "ns3::PfFfMacScheduler");
    // Path loss on both spectrum channels: the loss matrix, dead (1000 dB) unless set.
    g.lte->SetAttribute("PathlossModel", StringValue("ns3::MatrixPropagationLossModel"));
    g.lte->SetPathlossModelAttribute("DefaultLoss", DoubleValue(kDeadLossDb));
    g.lte->SetAttribute("FadingModel", StringValue(""));
    // Signals beyond 500 dB of loss are not delivered at all (exactly equivalent to a gain of
    // 1e-100 for SINR purposes, and it keeps the control messages of dead UEs, e.g. buffer
    // status reports, from reaching an eNB).
    g.lte->SetSpectrumChannelAttribute("MaxLossDb", DoubleValue(kMaxDeliveredLossDb));

    // --- the FL server behind the PGW ---
    Ptr<Node> pgw = g.epc->GetPgwNode();
    NodeContainer serverNodes;
    serverNodes.Create(1);
    g.server = serverNodes.Get(0);
    InternetStackHelper internet;
    internet.Install(serverNodes);
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate("100Gb/s")));
    p2p.SetDeviceAttribute("Mtu", UintegerValue(1500));
    p2p.SetChannelAttribute("Delay", TimeValue(MicroSeconds(c.backhaulUs)));
    NetDeviceContainer backhaul = p2p.Install(pgw, g.server);
    Ipv4AddressHelper addr;
    addr.SetBase("1.0.0.0", "255.0.0.0");
    Ipv4InterfaceContainer backhaulIf = addr.Assign(backhaul);
    g.serverAddr = backhaulIf.GetAddress(1);
    Ipv4StaticRoutingHelper routing;
    routing.GetStaticRouting(g.server->GetObject<Ipv4>())
        ->AddNetworkRouteTo(Ipv4Address("7.0.0.0"), Ipv4Mask("255.0.0.0"), 1);

    // --- radio nodes; positions are irrelevant (the loss comes from the matrix) ---
    g.enbNodes.Create(C);
    g.ueNodes.Create(N);
    MobilityHelper mobility;
    mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel");
    mobility.Install(g.enbNodes);
    mobility.Install(g.ueNodes);
    for (auto it = NodeList::Begin(); it != NodeList::End(); ++it)
    {
        if (!(*it)->GetObject<MobilityModel>())
        {
            mobility.Install(*it); // EPC nodes and the server too (unused by the channel)
        }
    }
    for (int e = 0; e < C; ++e)
    {
        g.enbMob.push_back(g.enbNodes.Get(e)->GetObject<MobilityModel>());
    }
    for (int u = 0; u < N; ++u)
    {
        g.ueMob.push_back(g.ueNodes.Get(u)->GetObject<MobilityModel>());
    }

    // --- eNBs: bandwidth and carrier of their band ---
    std::ostringstream carriers;
    for (int e = 0; e < C; ++e)
    {
        uint32_t ul = 0;
        if (!CarrierOfBand(g.band[e], c.rbs, ul))
        {
            err = "band index " + std::to_string(g.band[e]) + " has no carrier left for " +
                  std::to_string(c.rbs) + " RBs";
            return false;
        }
        g.lte->SetEnbDeviceAttribute("UlBandwidth", UintegerValue(c.rbs));
        g.lte->SetEnbDeviceAttribute("DlBandwidth", UintegerValue(c.rbs));
        g.lte->SetEnbDeviceAttribute("UlEarfcn", UintegerValue(ul));
        g.lte->SetEnbDeviceAttribute("DlEarfcn", UintegerValue(ul - 18000));
        g.enbDevs.Add(g.lte->InstallEnbDevice(NodeContainer(g.enbNodes.Get(e))));
        carriers << " enb" << e << ":band" << g.band[e] << ":ul" << ul << "/dl" << ul - 18000;
    }
    g.ueDevs = g.lte->InstallUeDevice(g.ueNodes);

    // The two loss matrices (one per spectrum channel).
    g.ulLoss = DynamicCast<MatrixPropagationLossModel>(
        g.lte->GetUplinkSpectrumChannel()->GetPropagationLossModel());
    g.dlLoss = DynamicCast<MatrixPropagationLossModel>(
        g.lte->GetDownlinkSpectrumChannel()->GetPropagationLossModel());
    if (!g.ulLoss || !g.dlLoss || g.ulLoss == g.dlLoss)
    {
        err = "could not find the two MatrixPropagationLossModel instances";
        return false;
    }

    // --- IP on the UEs ---
    internet.Install(g.ueNodes);
    Ipv4InterfaceContainer ueIf = g.epc->AssignUeIpv4Address(g.ueDevs);
    for (int u = 0; u < N; ++u)
    {
        Ptr<Node> n = g.ueNodes.Get(u);
        routing.GetStaticRouting(n->GetObject<Ipv4>())
            ->SetDefaultRoute(g.epc->GetUeDefaultGatewayAddress(), 1);
        g.ueAddr.push_back(ueIf.GetAddress(u));
        g.addrToUe[ueIf.GetAddress(u).Get()] = u;
        g.uePhy.push_back(g.ueDevs.Get(u)->GetObject<LteUeNetDevice>()->GetPhy());
    }

    // --- fixed random streams: LTE (and EPC) first, then the IP stacks ---
    NetDeviceContainer all;
    all.Add(g.enbDevs);
    all.Add(g.ueDevs);
    int64_t stream = g.lte->AssignStreams(all, 0);
    NodeContainer ipNodes;
    ipNodes.Add(g.ueNodes);
    ipNodes.Add(g.server);
    internet.AssignStreams(ipNodes, stream);

    // --- per-UE state, warm-up losses, powers ---
    g.ue.assign(N, UeState());
    for (int u = 0; u < N; ++u)
    {
        g.ue[u].enb = g.attach[u];
        g.ue[u].loss.assign(C, kDeadLossDb);
    }
    if (!g.earlyGains.empty())
    {
        ApplyGains(g.earlyGains); // they stay in force from the origin on
    }
    else
    {
        // No gains yet: let every UE see its serving eNB at warmup_loss_db so that it can
        // attach; these losses are removed again at the origin.
        for (int u = 0; u < N; ++u)
        {
            SetLink(u, g.attach[u], c.warmupLossDb);
        }
    }
    for (auto& p : g.earlyPower)
    {
        ApplyPower(p.first, p.second);
    }

    // --- attach every UE to its eNB (ideal RRC, default EPS bearer) ---
    for (int u = 0; u < N; ++u)
    {
        g.lte->Attach(g.ueDevs.Get(u), g.enbDevs.Get(g.attach[u]));
    }

    // --- PHY traces for the statistics ---
    for (int e = 0; e < C; ++e)
    {
        g.enbDevs.Get(e)
            ->GetObject<LteEnbNetDevice>()
            ->GetPhy()
            ->GetUlSpectrumPhy()
            ->TraceConnectWithoutContext("UlPhyReception", MakeCallback(&OnUlPhyReception));
    }
    for (int u = 0; u < N; ++u)
    {
        g.uePhy[u]->TraceConnectWithoutContext("ReportUlPhyResourceBlocks",
                                               MakeBoundCallback(&OnUlResourceBlocks, u));
    }

    // --- the FL server's sockets ---
    g.tcpListen = Socket::CreateSocket(g.server, TcpSocketFactory::GetTypeId());
    g.tcpListen->Bind(InetSocketAddress(Ipv4Address::GetAny(), kTcpPort));
    g.tcpListen->Listen();
    g.tcpListen->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                   MakeCallback(&OnTcpAccept));
    g.udpServer = Socket::CreateSocket(g.server, UdpSocketFactory::GetTypeId());
    g.udpServer->Bind(InetSocketAddress(Ipv4Address::GetAny(), kUdpPort));
    g.udpServer->SetRecvCallback(MakeCallback(&OnUdpServerRecv));

    // --- warm-up: attach, RRC connection, first CQI reports ---
    g.origin = MilliSeconds(c.warmupMs);
    Simulator::Schedule(g.origin, &StopNow);
    Simulator::Run();

    std::ostringstream rntis;
    for (int u = 0; u < N; ++u)
    {
        Ptr<LteUeRrc> rrc = g.ueDevs.Get(u)->GetObject<LteUeNetDevice>()->GetRrc();
        uint16_t cell = g.enbDevs.Get(g.attach[u])->GetObject<LteEnbNetDevice>()->GetCellId();
        if (rrc->GetState() != LteUeRrc::CONNECTED_NORMALLY || rrc->GetCellId() != cell)
        {
            err = "UE " + std::to_string(u) + " not connected to eNB " +
                  std::to_string(g.attach[u]) + " after the warm-up (RRC state " +
                  std::to_string(int(rrc->GetState())) + "); lengthen warmup_ms";
            return false;
        }
        g.ue[u].rnti = rrc->GetRnti();
        g.ue[u].cellId = cell;
        g.rntiToUe[(uint32_t(cell) << 16) | rrc->GetRnti()] = u;
        rntis << " ue" << u << ":cell" << cell << ":rnti" << rrc->GetRnti();
    }
    if (g.earlyGains.empty())
    {
        for (int u = 0; u < N; ++u)
        {
            ApplyUeLosses(u); // back to dead until the first `gains`
        }
    }
    std::cerr << "wflsim-lte: ready; carriers" << carriers.str() << "; SRS period " << srs
              << " ms; RLC " << (c.rlcAm ? "AM" : "UM") << " buffer " << c.rlcBuffer
              << " B;" << rntis.str() << std::endl;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

bool
NeedUes(std::string& err)
{
    if (!g.uesGiven)
    {
        err = "set config ues=... first";
        return false;
    }
    return true;
}

void
CmdConfig(const std::vector<std::string>& a)
{
    if (g.ready)
    {
        return ReplyError("config after ready");
    }
    Settings c = g.cfg;
    bool uesGiven = g.uesGiven;
    for (size_t i = 1; i < a.size(); ++i)
    {
        size_t eq = a[i].find('=');
        if (eq == std::string::npos || eq == 0)
        {
            return ReplyError("bad config item '" + a[i] + "'");
        }
        std::string k = a[i].substr(0, eq);
        std::string v = a[i].substr(eq + 1);
        int64_t n = 0;
        double d = 0;
        auto intIn = [&](int64_t lo, int64_t hi) {
            return ParseInt(v, n) && n >= lo && n <= hi;
        };
        if (k == "ues")
        {
            if (!intIn(1, 100000))
            {
                return ReplyError("bad ues '" + v + "'");
            }
            c.ues = int(n);
            uesGiven = true;
        }
        else if (k == "enbs")
        {
            if (!intIn(1, 10000))
            {
                return ReplyError("bad enbs '" + v + "'");
            }
            c.enbs = int(n);
        }
        else if (k == "rbs")
        {
            if (!ParseInt(v, n) ||
                !(n == 6 || n == 15 || n == 25 || n == 50 || n == 75 || n == 100))
            {
                return ReplyError("bad rbs '" + v + "' (6, 15, 25, 50, 75 or 100)");
            }
            c.rbs = int(n);
        }
        else if (k == "seed")
        {
            if (!intIn(1, 4294967295LL))
            {
                return ReplyError("bad seed '" + v + "'");
            }
            c.seed = uint32_t(n);
        }
        else if (k == "run")
        {
            if (!intIn(0, INT64_MAX))
            {
                return ReplyError("bad run '" + v + "'");
            }
            c.run = uint64_t(n);
        }
        else if (k == "transport")
        {
            if (v != "tcp" && v != "udp")
            {
                return ReplyError("bad transport '" + v + "' (tcp or udp)");
            }
            c.tcp = (v == "tcp");
        }
        else if (k == "noise_figure_db")
        {
            if (!ParseDouble(v, d) || !std::isfinite(d))
            {
                return ReplyError("bad noise_figure_db '" + v + "'");
            }
            c.noiseFigureDb = d;
        }
        else if (k == "warmup_ms")
        {
            if (!intIn(1, 1000000))
            {
                return ReplyError("bad warmup_ms '" + v + "'");
            }
            c.warmupMs = n;
        }
        else if (k == "backhaul_delay_us")
        {
            if (!intIn(0, 10000000))
            {
                return ReplyError("bad backhaul_delay_us '" + v + "'");
            }
            c.backhaulUs = n;
        }
        else if (k == "tcp_segment")
        {
            if (!intIn(100, 65000))
            {
                return ReplyError("bad tcp_segment '" + v + "'");
            }
            c.tcpSegment = uint32_t(n);
        }
        else if (k == "udp_packet")
        {
            if (!intIn(kUdpHeader + 1, 65000))
            {
                return ReplyError("bad udp_packet '" + v + "'");
            }
            c.udpPacket = uint32_t(n);
        }
        else if (k == "udp_rate_bps")
        {
            if (!ParseDouble(v, d) || !std::isfinite(d) || d < 1000.0)
            {
                return ReplyError("bad udp_rate_bps '" + v + "'");
            }
            c.udpRateBps = d;
        }
        else if (k == "scheduler")
        {
            if (v != "pf" && v != "rr")
            {
                return ReplyError("bad scheduler '" + v + "' (pf or rr)");
            }
            c.rr = (v == "rr");
        }
        else if (k == "warmup_loss_db")
        {
            if (!ParseDouble(v, d) || !std::isfinite(d))
            {
                return ReplyError("bad warmup_loss_db '" + v + "'");
            }
            c.warmupLossDb = d;
        }
        else if (k == "rlc")
        {
            if (v != "am" && v != "um")
            {
                return ReplyError("bad rlc '" + v + "' (am or um)");
            }
            c.rlcAm = (v == "am");
        }
        else if (k == "rlc_buffer")
        {
            if (!intIn(0, 4294967295LL))
            {
                return ReplyError("bad rlc_buffer '" + v + "'");
            }
            c.rlcBuffer = uint32_t(n);
        }
        else if (k == "tcp_buffer")
        {
            if (!intIn(1024, 4294967295LL))
            {
                return ReplyError("bad tcp_buffer '" + v + "'");
            }
            c.tcpBuffer = uint32_t(n);
        }
        else if (k == "srs_period_ms")
        {
            if (!ParseInt(v, n) || !(n == 0 || n == 2 || n == 5 || n == 10 || n == 20 ||
                                     n == 40 || n == 80 || n == 160 || n == 320))
            {
                return ReplyError("bad srs_period_ms '" + v + "'");
            }
            c.srsPeriodMs = int(n);
        }
        else if (k == "rlc_status_prohibit_ms")
        {
            if (!intIn(0, 500))
            {
                return ReplyError("bad rlc_status_prohibit_ms '" + v + "'");
            }
            c.statusProhibitMs = n;
        }
        else if (k == "udp_repair_ms")
        {
            if (!intIn(1, 1000000))
            {
                return ReplyError("bad udp_repair_ms '" + v + "'");
            }
            c.udpRepairMs = n;
        }
        else
        {
            return ReplyError("unknown config key '" + k + "'");
        }
    }
    // Keep what was given so far where it still makes sense.
    if (c.ues != g.cfg.ues || c.enbs != g.cfg.enbs)
    {
        g.earlyGains.clear();
    }
    if (c.ues != g.cfg.ues)
    {
        g.attach.resize(c.ues, -1);
        g.earlyPower.clear();
    }
    if (c.enbs != g.cfg.enbs)
    {
        g.band.resize(c.enbs, 0);
        for (int& e : g.attach)
        {
            if (e >= c.enbs)
            {
                e = -1;
            }
        }
    }
    g.cfg = c;
    g.uesGiven = uesGiven;
    ReplyOk();
}

void
CmdBand(const std::vector<std::string>& a)
{
    if (g.ready)
    {
        return ReplyError("band after ready");
    }
    int64_t e = 0;
    int64_t b = 0;
    if (a.size() != 3 || !ParseInt(a[1], e) || !ParseInt(a[2], b))
    {
        return ReplyError("usage: band <enb> <band_index>");
    }
    if (e < 0 || e >= g.cfg.enbs)
    {
        return ReplyError("unknown eNB " + a[1]);
    }
    uint32_t ul = 0;
    if (b < 0 || b > 1000000 || !CarrierOfBand(int(b), g.cfg.rbs, ul))
    {
        return ReplyError("band index " + a[2] + " out of range for " +
                          std::to_string(g.cfg.rbs) + " RBs");
    }
    g.band[e] = int(b);
    ReplyOk();
}

void
CmdAttach(const std::vector<std::string>& a)
{
    std::string err;
    if (g.ready)
    {
        return ReplyError("attach after ready");
    }
    if (!NeedUes(err))
    {
        return ReplyError(err);
    }
    int64_t u = 0;
    int64_t e = 0;
    if (a.size() != 3 || !ParseInt(a[1], u) || !ParseInt(a[2], e))
    {
        return ReplyError("usage: attach <ue> <enb>");
    }
    if (u < 0 || u >= g.cfg.ues)
    {
        return ReplyError("unknown UE " + a[1]);
    }
    if (e < 0 || e >= g.cfg.enbs)
    {
        return ReplyError("unknown eNB " + a[2]);
    }
    g.attach[u] = int(e);
    ReplyOk();
}

void
CmdReady(const std::vector<std::string>& a)
{
    std::string err;
    if (g.ready)
    {
        return ReplyError("ready twice");
    }
    if (a.size() != 1)
    {
        return ReplyError("usage: ready");
    }
    if (!NeedUes(err))
    {
        return ReplyError(err);
    }
    for (int u = 0; u < g.cfg.ues; ++u)
    {
        if (g.attach[u] < 0)
        {
            return ReplyError("UE " + std::to_string(u) + " has no attach line");
        }
    }
    for (int e = 0; e < g.cfg.enbs; ++e)
    {
        uint32_t ul = 0;
        if (!CarrierOfBand(g.band[e], g.cfg.rbs, ul))
        {
            return ReplyError("band index " + std::to_string(g.band[e]) +
                              " out of range for " + std::to_string(g.cfg.rbs) + " RBs");
        }
    }
    if (!Build(err))
    {
        // The simulator is in an undefined state: report and leave.
        ReplyError(err);
        std::fflush(g.out);
        _exit(1);
    }
    g.ready = true;
    ReplyOk("0");
}

// Checks the time of a timed command; returns the delay until it (0: now).
bool
TimedPrologue(const std::vector<std::string>& a, size_t nargs, const char* usage, int64_t& t,
              Time& delay)
{
    std::string err;
    if (a.size() != nargs)
    {
        ReplyError(std::string("usage: ") + usage);
        return false;
    }
    if (!ParseTime(a[1], t, err))
    {
        ReplyError(err);
        return false;
    }
    if (!g.ready)
    {
        ReplyError("not ready");
        return false;
    }
    int64_t now = NowNs();
    if (t < now)
    {
        ReplyError("time " + a[1] + " is in the past (now " + std::to_string(now) + ")");
        return false;
    }
    delay = NanoSeconds(t - now);
    return true;
}

bool
ParseUe(const std::string& s, int& ue)
{
    int64_t v = 0;
    int n = g.uesGiven ? g.cfg.ues : 0;
    if (!ParseInt(s, v) || v < 0 || v >= n)
    {
        ReplyError("unknown UE '" + s + "'");
        return false;
    }
    ue = int(v);
    return true;
}

void
CmdGains(const std::vector<std::string>& a)
{
    std::string err;
    if (!NeedUes(err))
    {
        return ReplyError(err);
    }
    const size_t NC = size_t(g.cfg.ues) * size_t(g.cfg.enbs);
    if (a.size() != 2 + NC)
    {
        return ReplyError("gains needs a time and " + std::to_string(NC) + " losses, got " +
                          std::to_string(a.size() >= 2 ? a.size() - 2 : 0));
    }
    std::vector<double> losses(NC);
    for (size_t i = 0; i < NC; ++i)
    {
        if (!ParseDouble(a[2 + i], losses[i]) || std::isnan(losses[i]))
        {
            return ReplyError("bad loss '" + a[2 + i] + "'");
        }
    }
    if (!g.ready)
    {
        // Extension: losses for the warm-up (and from the origin on).
        int64_t t = 0;
        if (!ParseTime(a[1], t, err) || t != 0)
        {
            return ReplyError("gains before ready must have time 0");
        }
        g.earlyGains = losses;
        return ReplyOk();
    }
    int64_t t = 0;
    Time delay;
    std::vector<std::string> head(a.begin(), a.begin() + 2);
    if (!TimedPrologue(head, 2, "gains <t_ns> <loss_db>*(N*C)", t, delay))
    {
        return;
    }
    if (delay.IsZero())
    {
        ApplyGains(losses);
    }
    else
    {
        Simulator::Schedule(delay, &ApplyGains, losses);
    }
    ReplyOk();
}

void
CmdPower(const std::vector<std::string>& a)
{
    int ue = 0;
    double dbm = 0;
    if (a.size() != 4)
    {
        return ReplyError("usage: power <t_ns> <ue> <dbm>");
    }
    if (!ParseUe(a[2], ue))
    {
        return;
    }
    if (!ParseDouble(a[3], dbm) || !std::isfinite(dbm))
    {
        return ReplyError("bad power '" + a[3] + "'");
    }
    if (!g.ready)
    {
        std::string err;
        int64_t t = 0;
        if (!ParseTime(a[1], t, err) || t != 0)
        {
            return ReplyError("power before ready must have time 0");
        }
        g.earlyPower.emplace_back(ue, dbm);
        return ReplyOk();
    }
    int64_t t = 0;
    Time delay;
    if (!TimedPrologue(a, 4, "power <t_ns> <ue> <dbm>", t, delay))
    {
        return;
    }
    if (delay.IsZero())
    {
        ApplyPower(ue, dbm);
    }
    else
    {
        Simulator::Schedule(delay, &ApplyPower, ue, dbm);
    }
    ReplyOk();
}

void
CmdStart(const std::vector<std::string>& a)
{
    int64_t t = 0;
    Time delay;
    int ue = 0;
    int64_t bytes = 0;
    if (!TimedPrologue(a, 4, "start <t_ns> <ue> <bytes>", t, delay) || !ParseUe(a[2], ue))
    {
        return;
    }
    if (!ParseInt(a[3], bytes) || bytes < 1)
    {
        return ReplyError("bad byte count '" + a[3] + "'");
    }
    if (!g.cfg.tcp)
    {
        const uint64_t per = g.cfg.udpPacket - kUdpHeader;
        if ((uint64_t(bytes) + per - 1) / per > 0xffffffffULL)
        {
            return ReplyError("upload too large for the UDP sequence header");
        }
    }
    // Now: the UE must be free. Later (traffic given in advance): checked when it comes (a
    // UE still busy then keeps its upload and the new one is dropped, said on stderr).
    if (delay.IsZero() && (g.ue[ue].current >= 0 || g.ue[ue].pendingStarts > 0))
    {
        return ReplyError("UE " + a[2] + " already has an upload");
    }
    if (delay.IsZero())
    {
        StartUpload(ue, uint64_t(bytes));
    }
    else
    {
        g.ue[ue].pendingStarts++;
        Simulator::ScheduleWithContext(g.ueNodes.Get(ue)->GetId(),
                                       delay,
                                       &StartUpload,
                                       ue,
                                       uint64_t(bytes));
    }
    ReplyOk();
}

void
CmdStop(const std::vector<std::string>& a)
{
    int64_t t = 0;
    Time delay;
    int ue = 0;
    if (!TimedPrologue(a, 3, "stop <t_ns> <ue>", t, delay) || !ParseUe(a[2], ue))
    {
        return;
    }
    // Statistics as of now (a stop in the future reports those known when it is given).
    std::string stats;
    int id = g.ue[ue].current;
    if (id >= 0)
    {
        stats = StatsString(g.uploads[id]);
    }
    else
    {
        Upload none; // no upload in flight: zero counts, current loss and power
        none.lossDb = AppliedUlLoss(ue);
        none.txDbm = g.uePhy[ue]->GetTxPower();
        stats = StatsString(none);
    }
    if (delay.IsZero())
    {
        StopUe(ue);
    }
    else
    {
        Simulator::ScheduleWithContext(g.ueNodes.Get(ue)->GetId(), delay, &StopUe, ue);
    }
    Reply("stopped " + std::to_string(ue) + " " + std::to_string(t) + " " + stats);
    ReplyOk();
}

// Prints one pending `end` line, if any.
bool
ReportOneCompletion()
{
    if (g.completedUnreported.empty())
    {
        return false;
    }
    int id = g.completedUnreported.front();
    g.completedUnreported.pop_front();
    const Upload& u = g.uploads[id];
    Reply("end " + std::to_string(u.ue) + " " + std::to_string(u.endNs) + " " + StatsString(u));
    return true;
}

void
CmdRun(const std::vector<std::string>& a)
{
    int64_t t = 0;
    Time delay;
    if (!TimedPrologue(a, 2, "run <t_ns>", t, delay))
    {
        return;
    }
    // An upload that finished in the same nanosecond as the last reported one: report it
    // first, without advancing.
    if (ReportOneCompletion())
    {
        return ReplyOk(std::to_string(NowNs()));
    }
    // Advance to t.  Events at t scheduled before this command run before the stop event
    // (which is inserted now, at t); events at t created later are left for the next `run`.
    // Nothing after t is ever processed.  An upload's last byte reaching the server calls
    // Simulator::Stop() and the run ends after that event; the stop event is then cancelled.
    EventId stop = Simulator::Schedule(delay, &StopNow);
    Simulator::Run();
    Simulator::Cancel(stop);
    ReportOneCompletion();
    ReplyOk(std::to_string(NowNs()));
}

// `runall <t>`: advance to t without stopping at completions (a plain ns-3 run of traffic
// scheduled in advance: the benchmark of the co-simulation's overhead); replies every `end`
// line up to t, then `ok <t>`.
void
CmdRunAll(const std::vector<std::string>& a)
{
    int64_t t = 0;
    Time delay;
    if (!TimedPrologue(a, 2, "runall <t_ns>", t, delay))
    {
        return;
    }
    EventId stop = Simulator::Schedule(delay, &StopNow);
    g.stopOnEnd = false;
    Simulator::Run();
    g.stopOnEnd = true;
    Simulator::Cancel(stop);
    while (ReportOneCompletion())
    {
    }
    ReplyOk(std::to_string(NowNs()));
}

void
CmdInflight(const std::vector<std::string>& a)
{
    int64_t t = 0;
    Time delay;
    if (!TimedPrologue(a, 2, "inflight <t_ns>", t, delay))
    {
        return;
    }
    if (!delay.IsZero())
    {
        return ReplyError("inflight needs the current time " + std::to_string(NowNs()));
    }
    // Uploads in flight, plus those that finished but whose `end` was not reported yet.
    std::vector<std::pair<int, uint64_t>> lines;
    for (int u = 0; u < g.cfg.ues; ++u)
    {
        if (g.ue[u].current >= 0)
        {
            lines.emplace_back(u, g.uploads[g.ue[u].current].delivered);
        }
    }
    for (int id : g.completedUnreported)
    {
        lines.emplace_back(g.uploads[id].ue, g.uploads[id].delivered);
    }
    std::sort(lines.begin(), lines.end());
    for (auto& l : lines)
    {
        Reply("inflight " + std::to_string(l.first) + " " + std::to_string(l.second));
    }
    ReplyOk();
}

// Diagnostics (extensions): `ulpeak <nrb>` -> ok <highest UL MCS> <its TB size in bits>;
// `serverbytes <ue>` -> ok <bytes the server received from that UE, any upload, any time>.
void
CmdUlPeak(const std::vector<std::string>& a)
{
    int64_t n = 0;
    if (a.size() != 2 || !ParseInt(a[1], n) || n < 1 || n > 110)
    {
        return ReplyError("usage: ulpeak <nrb 1..110>");
    }
    Ptr<LteAmc> amc = CreateObject<LteAmc>();
    int mcs = amc->GetMcsFromCqi(15); // the PF/RR schedulers map the best CQI to this MCS
    int tbs = amc->GetUlTbSizeFromMcs(mcs, int(n));
    ReplyOk(std::to_string(mcs) + " " + std::to_string(tbs));
}

void
CmdServerBytes(const std::vector<std::string>& a)
{
    int ue = 0;
    if (a.size() != 2)
    {
        return ReplyError("usage: serverbytes <ue>");
    }
    if (!g.ready)
    {
        return ReplyError("not ready");
    }
    if (!ParseUe(a[1], ue))
    {
        return;
    }
    ReplyOk(std::to_string(g.ue[ue].serverBytes));
}

} // namespace

int
main(int, char**)
{
    // Replies go to a private copy of stdout; fd 1 itself now points at stderr, so that any
    // stray output of ns-3 (or of anything else) can never corrupt the protocol.
    int fd = dup(1);
    if (fd < 0 || dup2(2, 1) < 0)
    {
        std::perror("wflsim-lte: dup");
        return 2;
    }
    g.out = fdopen(fd, "w");
    if (!g.out)
    {
        std::perror("wflsim-lte: fdopen");
        return 2;
    }
    g.band.assign(g.cfg.enbs, 0);

    std::string line;
    while (std::getline(std::cin, line))
    {
        std::istringstream is(line);
        std::vector<std::string> a;
        std::string w;
        while (is >> w)
        {
            a.push_back(w);
        }
        if (a.empty())
        {
            ReplyError("empty command");
            continue;
        }
        const std::string& cmd = a[0];
        if (cmd == "config")
        {
            CmdConfig(a);
        }
        else if (cmd == "band")
        {
            CmdBand(a);
        }
        else if (cmd == "attach")
        {
            CmdAttach(a);
        }
        else if (cmd == "ready")
        {
            CmdReady(a);
        }
        else if (cmd == "gains")
        {
            CmdGains(a);
        }
        else if (cmd == "power")
        {
            CmdPower(a);
        }
        else if (cmd == "start")
        {
            CmdStart(a);
        }
        else if (cmd == "stop")
        {
            CmdStop(a);
        }
        else if (cmd == "run")
        {
            CmdRun(a);
        }
        else if (cmd == "inflight")
        {
            CmdInflight(a);
        }
        else if (cmd == "runall")
        {
            CmdRunAll(a);
        }
        else if (cmd == "ulpeak")
        {
            CmdUlPeak(a);
        }
        else if (cmd == "serverbytes")
        {
            CmdServerBytes(a);
        }
        else if (cmd == "quit")
        {
            ReplyOk();
            std::fflush(g.out);
            _exit(0);
        }
        else
        {
            ReplyError("unknown command '" + cmd + "'");
        }
    }
    std::fflush(g.out);
    _exit(0);
}
