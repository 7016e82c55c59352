// Two processes' coordinators in one test process (rank 0 serving the store,
// rank 1 a client): what one of them sees when the other stops taking part.
#include "optstate/coordinator.h"

#include "optstate/file_io.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace optstate {
namespace {

// A TCP socket bound to 127.0.0.1 on a port the kernel chose; sets *port.
int BindLoopback(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

uint16_t FreePort() {
  uint16_t port = 0;
  ::close(BindLoopback(&port));
  return port;
}

// Accepts connections and reads what arrives but never answers, so that a
// request made to it stays in progress the way one does when a signal stops
// the thread that made it half-way.
class SilentStore {
 public:
  SilentStore() {
    listener_ = BindLoopback(&port_);
    ::listen(listener_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  // Closing the connections ends whatever requests are still waiting.
  ~SilentStore() {
    stop_ = true;
    thread_.join();
    for (auto& [fd, bytes] : received_) ::close(fd);
    ::close(listener_);
  }
  uint16_t port() const { return port_; }
  // Whether any connection has sent `text`.
  bool Heard(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [fd, bytes] : received_) {
      if (bytes.find(text) != std::string::npos) return true;
    }
    return false;
  }
  bool WaitToHear(const std::string& text) {
    for (int i = 0; i < 100 && !Heard(text); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return Heard(text);
  }

 private:
  void Serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [fd, bytes] : received_) fds.push_back({fd, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (fds[0].revents & POLLIN) received_[::accept(listener_, nullptr, nullptr)];
      for (size_t i = 1; i < fds.size(); ++i) {
        char buf[4096];
        ssize_t n = (fds[i].revents & POLLIN) ? ::read(fds[i].fd, buf, sizeof buf) : 0;
        if (n > 0) received_[fds[i].fd].append(buf, n);
      }
    }
  }

  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<int, std::string> received_;  // by connection
  std::thread thread_;
};

// Rank 1 of 2 of job "test", a client of `store` (as under torchrun's agent store).
TcpStoreEndpoint ClientOf(const SilentStore& store) {
  TcpStoreEndpoint e;
  e.rank = 1;
  e.size = 2;
  e.host = "127.0.0.1";
  e.port = store.port();
  e.agent_store = true;  // connect as a client only
  e.job = "test";
  return e;
}

struct Pair {
  std::unique_ptr<Coordinator> rank0, rank1;
  uint16_t port = 0;
};

Pair Connect(std::chrono::seconds timeout) {
  TcpStoreEndpoint e;
  e.size = 2;
  e.host = "127.0.0.1";
  e.port = FreePort();
  e.job = "test";
  e.timeout = timeout;
  auto zero = ConnectTcpStore(e);  // serves the store; does not wait for rank 1
  TcpStoreEndpoint e1 = e;
  e1.rank = 1;
  auto second = ConnectTcpStore(e1);
  EXPECT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_TRUE(second.ok()) << second.status().ToString();
  if (!zero.ok() || !second.ok()) return {};
  return {std::move(*zero), std::move(*second), e.port};
}

TEST(TcpStoreCoordinatorTest, GathersInRankOrder) {
  Pair p = Connect(std::chrono::seconds(30));
  ASSERT_TRUE(p.rank0 && p.rank1);
  auto zero = std::async(std::launch::async, [&] { return p.rank0->AllGather("s", "from 0"); });
  auto one = p.rank1->AllGather("s", "from 1");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, (std::vector<std::string>{"from 0", "from 1"}));
  auto z = zero.get();
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, *one);
}

// An interrupted process says so; the one waiting for it stops at once with
// that reason rather than after the 30-minute timeout.
TEST(TcpStoreCoordinatorTest, AbortEndsTheOthersWait) {
  Pair p = Connect(std::chrono::seconds(1800));
  ASSERT_TRUE(p.rank0 && p.rank1);
  auto start = std::chrono::steady_clock::now();
  auto zero = std::async(std::launch::async, [&] { return p.rank0->AllGather("written", "x"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  p.rank1->Abort("process 1 of 2 was interrupted (SIGINT)");
  auto z = zero.get();
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().ToString(), "I/O error: c10d store at 127.0.0.1:" + std::to_string(p.port) +
                                       ", step 'written': process 1 of 2 was interrupted (SIGINT)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// The interrupt hook calls Abort on a helper thread while the main thread may
// be stopped in the middle of a request (CI saw it: Ctrl-C landed during a
// check() in AllGather, and the abort never left). It must not wait for that
// request: it has a connection of its own.
TEST(TcpStoreCoordinatorTest, AbortGoesOutWhileAnotherRequestIsUnanswered) {
  auto store = std::make_unique<SilentStore>();
  TcpStoreEndpoint e = ClientOf(*store);
  e.timeout = std::chrono::seconds(60);
  auto c = ConnectTcpStore(e);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto gather = std::async(std::launch::async, [&] { return (*c)->AllGather("start", "x"); });
  ASSERT_TRUE(store->WaitToHear("optstate/test/start/1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // now waiting for an answer
  auto abort = std::async(std::launch::async, [&] { (*c)->Abort("process 1 of 2 was interrupted (SIGINT)"); });
  EXPECT_EQ(abort.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(store->WaitToHear("optstate/test/abort"));
  EXPECT_TRUE(store->Heard("process 1 of 2 was interrupted (SIGINT)"));
  store.reset();  // closing its connections ends the unanswered request
  EXPECT_FALSE(gather.get().ok());
}

// A process cut off from the store (its link down) sends its beat into a
// connection that never answers: after heartbeat_timeout it names itself as
// the one cut off, and its work is cancelled, though every request it made is
// still waiting.
TEST(TcpStoreCoordinatorTest, UnansweredBeatNamesThisProcess) {
  auto store = std::make_unique<SilentStore>();
  TcpStoreEndpoint e = ClientOf(*store);
  e.heartbeat_timeout = std::chrono::seconds(2);
  auto c = ConnectTcpStore(e);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(store->WaitToHear("optstate/test/beat/1"));
  const auto start = std::chrono::steady_clock::now();
  while ((*c)->Fault().empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ((*c)->Fault(), "c10d store at 127.0.0.1:" + std::to_string(store->port()) +
                               ": process 1 of 2 (this one) has had no answer from the store for 2 s "
                               "(its network or the store's host is down)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_TRUE(CancellationRequested());
  ClearCancellation();
  store.reset();  // closing its connections ends the unanswered beat
}

TEST(TcpStoreCoordinatorTest, SilentProcessTimesOutNamingIt) {
  Pair p = Connect(std::chrono::seconds(1));
  ASSERT_TRUE(p.rank0 && p.rank1);
  auto z = p.rank0->AllGather("start", "x");
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().ToString(), "I/O error: c10d store at 127.0.0.1:" + std::to_string(p.port) +
                                       ", step 'start': no word from process(es) 1 of 2 after 1 s");
}

}  // namespace
}  // namespace optstate

namespace optstate {
namespace {

// A process that dies without a word (SIGKILL, the OOM killer) stops beating:
// the one waiting for it fails naming it after heartbeat_timeout, not after
// the 30-minute timeout. A process that has said its part is not waited for.
TEST(TcpStoreCoordinatorTest, ProcessThatStopsBeatingIsNamed) {
  TcpStoreEndpoint e;
  e.size = 3;
  e.host = "127.0.0.1";
  e.port = FreePort();
  e.job = "test";
  e.heartbeat_timeout = std::chrono::seconds(2);
  auto zero = ConnectTcpStore(e);
  e.rank = 1;
  auto one = ConnectTcpStore(e);
  e.rank = 2;
  auto two = ConnectTcpStore(e);
  ASSERT_TRUE(zero.ok() && one.ok() && two.ok());
  auto first = std::async(std::launch::async, [&] { return (*zero)->AllGather("start", "0"); });
  auto second = std::async(std::launch::async, [&] { return (*two)->AllGather("start", "2"); });
  ASSERT_TRUE((*one)->AllGather("start", "1").ok());
  ASSERT_TRUE(first.get().ok() && second.get().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // rank 1 has beaten
  auto start = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] { return (*zero)->AllGather("written", "0"); });
  auto also = std::async(std::launch::async, [&] { return (*two)->AllGather("written", "2"); });
  one->reset();  // gone without a word: no abort, no contribution, no more beats
  StatusOr<std::vector<std::string>> z = waiting.get();
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().ToString(), "I/O error: c10d store at 127.0.0.1:" + std::to_string(e.port) +
                                       ", step 'written': process 1 of 3 stopped answering: no heartbeat for 2 s "
                                       "(killed, out of memory, or its host or network is down)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(6));
  EXPECT_FALSE(also.get().ok());
}

}  // namespace
}  // namespace optstate
