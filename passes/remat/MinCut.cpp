//===- MinCut.cpp - ds-remat's kept set as a minimum s-t cut ----------===//
//
// Which forward values to keep is a closure problem, solved exactly as a
// minimum cut (the construction of PyTorch's min-cut partitioner, with
// recomputation priced instead of banned). Per forward op o a vertex R_o,
// on the sink side when the backward recomputes o; per value v a vertex
// A_v, on the sink side when v is available to the backward:
//
//   S -> R_o   weight x FLOPs(o) + 1   cut when o is recomputed
//   R_o -> A_v bytes(v)                cut when v is kept (o not recomputed
//                                      but v available)
//   A_v -> T   infinite when the backward reads v
//   A_u -> R_o infinite for each operand u of o: recomputing o needs u
//
// A finite cut is a consistent plan and its capacity is kept bytes +
// weight x recomputed FLOPs (+1 per recomputed op, which breaks ties toward
// recomputing less). Views (ds.reshape) cannot be kept alone, since keeping
// one keeps its operand's buffer: their R -> A edge is infinite, and their
// recomputation is free. The loss (ds.cross_entropy) is never recomputed.
//
//===----------------------------------------------------------------------===//
#include "passes/remat/Remat.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>

#include <cmath>
#include <cstdio>
#include <limits>

namespace mlir::ds::remat {

namespace {

using Traits =
    boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
struct VertexProps {
  boost::default_color_type color;
  int64_t distance;
  Traits::edge_descriptor predecessor;
};
struct EdgeProps {
  int64_t capacity = 0, residual = 0;
  Traits::edge_descriptor reverse;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS,
                                    VertexProps, EdgeProps>;

constexpr int64_t kInfinite = int64_t(1) << 60;

void addEdge(Graph &graph, size_t from, size_t to, int64_t capacity) {
  auto e = boost::add_edge(from, to, graph).first;
  auto r = boost::add_edge(to, from, graph).first;
  graph[e].capacity = capacity;
  graph[r].capacity = 0;
  graph[e].reverse = r;
  graph[r].reverse = e;
}

int64_t clampedCost(double c) {
  if (!(c < 1e17))
    return int64_t(1e17);
  return static_cast<int64_t>(std::llround(c));
}

} // namespace

Choice minimumCut(const ForwardGraph &g, double weight) {
  const size_t source = 0, sink = 1, numOps = g.ops.size();
  auto opVertex = [&](unsigned o) { return 2 + o; };
  auto valueVertex = [&](unsigned v) { return 2 + numOps + v; };
  Graph graph(2 + numOps + g.size());

  llvm::SmallVector<double> opFlops(numOps, 0);
  for (unsigned v = 0; v < g.size(); ++v)
    opFlops[g.opOf[v]] = g.flops(v);
  for (unsigned o = 0; o < numOps; ++o)
    addEdge(graph, source, opVertex(o),
            isa<CrossEntropyOp, CrossEntropyPartLossOp>(g.ops[o])
                ? kInfinite
                : clampedCost(weight * opFlops[o]) + 1);
  for (unsigned v = 0; v < g.size(); ++v) {
    bool view = isa<ReshapeOp>(g.ops[g.opOf[v]]);
    addEdge(graph, opVertex(g.opOf[v]), valueVertex(v),
            view ? kInfinite : static_cast<int64_t>(g.bytes(v)));
    if (g.needed.test(v))
      addEdge(graph, valueVertex(v), sink, kInfinite);
  }
  for (unsigned o = 0; o < numOps; ++o)
    for (Value in : g.ops[o]->getOperands())
      if (auto it = g.id.find(in); it != g.id.end())
        addEdge(graph, valueVertex(it->second), opVertex(o), kInfinite);

  boost::boykov_kolmogorov_max_flow(
      graph, boost::get(&EdgeProps::capacity, graph),
      boost::get(&EdgeProps::residual, graph),
      boost::get(&EdgeProps::reverse, graph),
      boost::get(&VertexProps::predecessor, graph),
      boost::get(&VertexProps::color, graph),
      boost::get(&VertexProps::distance, graph),
      boost::get(boost::vertex_index, graph), source, sink);

  // Black: the source side of the minimum cut.
  auto sourceSide = [&](size_t vertex) {
    return graph[vertex].color == boost::black_color;
  };
  Choice c{llvm::BitVector(g.size()), ""};
  for (unsigned v = 0; v < g.size(); ++v)
    if (sourceSide(opVertex(g.opOf[v])) && !sourceSide(valueVertex(v)))
      c.kept.set(v);
  char name[64];
  std::snprintf(name, sizeof name, "min-cut (%.3g bytes/FLOP)", weight);
  c.name = name;
  return c;
}

} // namespace mlir::ds::remat
