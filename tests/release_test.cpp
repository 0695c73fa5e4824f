// Freeing a graph needs no memory. A MemoryError's unwinding frees the graph that was being
// built, at a moment when every allocation fails; a release queue that had to allocate fell back
// to freeing in place, a recursion as deep as the graph, and the stack ran out (a crash in one
// run of the out-of-memory test in safety_test, where the moment is down to chance). Here this
// file's operator new refuses, on the test's thread, while long graphs of each kind are freed:
// every node must go, and the process must go on.

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <unordered_set>
#include <vector>

#include <tapegrad/tapegrad.h>

namespace {
thread_local bool refuse_new = false;  // operator new throws on this thread while set

void* allocate(std::size_t n) {
  if (refuse_new) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

// Every unaligned form, new and delete alike, so that a sanitizer pairs malloc with free
// throughout (the aligned forms stay the runtime's, in pairs of their own).
void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return refuse_new ? nullptr : std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return refuse_new ? nullptr : std::malloc(n ? n : 1);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

using tg::Tensor;

constexpr int kLength = 300000;  // ~300k frames of recursion would take far more than 8 MB

// The graph y holds is freed while operator new refuses: every node y reaches through edges,
// and the `more` nodes held otherwise (by closures), must be gone after.
void free_refusing_new(Tensor& y, std::vector<std::weak_ptr<tg::Node>> more = {}) {
  std::vector<std::weak_ptr<tg::Node>> nodes = std::move(more);
  std::unordered_set<const tg::Node*> seen;
  std::vector<const tg::Node*> stack{y.impl_ptr()->grad_fn.get()};
  while (!stack.empty()) {
    const tg::Node* n = stack.back();
    stack.pop_back();
    if (!n || !seen.insert(n).second) continue;
    nodes.push_back(std::const_pointer_cast<tg::Node>(n->shared_from_this()));
    for (const tg::Edge& e : n->edges()) stack.push_back(e.node());
  }
  ASSERT_GE(nodes.size(), 2u);
  refuse_new = true;
  y = Tensor();
  refuse_new = false;
  std::size_t alive = 0;
  for (const std::weak_ptr<tg::Node>& n : nodes) alive += !n.expired();
  EXPECT_EQ(alive, 0u) << "of " << nodes.size() << " nodes";
}

// Runs make_graph in a child process, so that a stack overflow is reported as this test's
// failure and not as the crash of the whole suite.
template <class F>
void expect_freed_without_memory(F make_graph) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        make_graph();
        std::_Exit(testing::Test::HasFailure() ? 1 : 0);
      },
      testing::ExitedWithCode(0), "");
}

// The refusal is real: operator new throws while it is on (what a std::vector that grows calls;
// the release queue was one once), so a passing test is not a refusal that never happened.
TEST(ReleaseWithoutMemory, TheRefusalIsReal) {
  refuse_new = true;
  bool threw = false;
  try {
    ::operator delete(::operator new(4000));
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  refuse_new = false;
  EXPECT_TRUE(threw);
}

// tanh saves its output: each node's closure holds the output's buffer, and its edge the chain.
TEST(ReleaseWithoutMemory, AChainOfOpsSavingTheirOutputs) {
  expect_freed_without_memory([] {
    const Tensor x = tg::full({4}, 0.5, tg::Dtype::f64).set_requires_grad();
    Tensor y = x;
    for (int i = 0; i < kLength; ++i) y = tg::tanh(y);
    free_refusing_new(y);
  });
}

// mul saves its inputs: each node's closure holds the tensor before it, whose node holds the
// next closure, and so on down: the chain hangs from the closures as well as the edges.
TEST(ReleaseWithoutMemory, AChainOfOpsSavingTheirInputs) {
  expect_freed_without_memory([] {
    const Tensor w = tg::full({4}, 1.0, tg::Dtype::f64).set_requires_grad();
    Tensor y = tg::full({4}, 0.5, tg::Dtype::f64).set_requires_grad();
    for (int i = 0; i < kLength; ++i) y = tg::mul(y, w);
    free_refusing_new(y);
  });
}

// y = add(side_i, y) with side_i a node of its own: freeing the last node queues the side node
// and the rest of the spine, so the nodes waiting to be freed grow with the length (the queue
// grows; a fixed reserve would not do).
TEST(ReleaseWithoutMemory, AComb) {
  expect_freed_without_memory([] {
    const Tensor x = tg::full({4}, 0.5, tg::Dtype::f64).set_requires_grad();
    Tensor y = tg::scale(x, 2.0);
    for (int i = 1; i < kLength / 2; ++i) y = tg::add(tg::scale(x, 1.0), y);
    free_refusing_new(y);
  });
}

// A chain that hangs from the closures alone: each node's derivative holds the tensor before it,
// which is not one of its inputs (no edge leads to it). Its node goes when that tensor does
// (~TensorImpl), into the queue as well.
TEST(ReleaseWithoutMemory, AChainHeldByClosuresAlone) {
  expect_freed_without_memory([] {
    const Tensor w = tg::ones({4}, tg::Dtype::f64).set_requires_grad();
    Tensor y = tg::scale(w, 1.0);
    std::vector<std::weak_ptr<tg::Node>> held_nodes;
    for (int i = 1; i < kLength; ++i) {
      const Tensor held = y;
      held_nodes.push_back(held.impl_ptr()->grad_fn);
      y = tg::record("hold", w.detach(), {w}).formula([held](const Tensor& dY) -> tg::Grads {
        return {dY};
      });
    }
    free_refusing_new(y, std::move(held_nodes));
  });
}

// The graph a backward with create_graph recorded (the out-of-memory test's second case): it
// holds the forward chain through the outputs its formulas saved.
TEST(ReleaseWithoutMemory, TheGraphOfAGradient) {
  expect_freed_without_memory([] {
    const Tensor x = tg::full({4}, 0.5, tg::Dtype::f64).set_requires_grad();
    Tensor y = x;
    for (int i = 0; i < kLength / 4; ++i) y = tg::tanh(y);
    Tensor g = tg::grad({tg::sum(y)}, {x}, {}, /*create_graph=*/true)[0];
    y = Tensor();  // the gradient's graph holds the chain through the outputs its formulas saved
    free_refusing_new(g);
  });
}

}  // namespace
