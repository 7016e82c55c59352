// Two processes' coordinators in one test process (rank 0 serving the store,
// rank 1 a client): what one of them sees when the other stops taking part.
#include "optstate/torch/tcp_store_coordinator.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

namespace optstate {
namespace {

uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
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
