// Work plan of the fused CUDA kernel (zernike_internal.hpp): which moments share a block and its
// register accumulators. Built on the host, and tested on the CPU.
#include <algorithm>
#include <map>

#include "zernike/zernike_internal.hpp"

namespace cubekit::zernike {

int Request::max_order() const {
    int n = -1;
    for (const ZernikeIndex& z : wanted) n = std::max(n, z.n);
    return n;
}

namespace {

struct Piece {
    std::vector<PlanSlot> slots;
};

// Packs pieces into tasks of at most kMaxSlots slots, first fit in decreasing size (the longest
// chains first, the short ones fill the gaps), so that tasks cost about the same.
void pack(std::vector<Piece> pieces, Plan& plan) {
    std::stable_sort(pieces.begin(), pieces.end(),
                     [](const Piece& a, const Piece& b) { return a.slots.size() > b.slots.size(); });
    std::vector<std::vector<PlanSlot>> tasks;
    for (Piece& p : pieces) {
        auto fits = std::find_if(tasks.begin(), tasks.end(),
                                 [&](const auto& t) { return t.size() + p.slots.size() <= std::size_t(kMaxSlots); });
        if (fits == tasks.end()) {
            tasks.emplace_back();
            fits = tasks.end() - 1;
        }
        fits->insert(fits->end(), p.slots.begin(), p.slots.end());
    }
    plan.tasks = int(tasks.size());
    plan.slot_count.clear();
    plan.slots.assign(tasks.size() * kMaxSlots, PlanSlot{});
    for (std::size_t t = 0; t < tasks.size(); ++t) {
        plan.slot_count.push_back(int(tasks[t].size()));
        std::copy(tasks[t].begin(), tasks[t].end(), plan.slots.begin() + std::ptrdiff_t(t * kMaxSlots));
    }
}

// Consecutive runs of at most kMaxSlots slots; the first slot of each run starts.
void split(const std::vector<PlanSlot>& run, std::vector<Piece>& pieces) {
    for (std::size_t i = 0; i < run.size(); i += kMaxSlots) {
        Piece p;
        p.slots.assign(run.begin() + std::ptrdiff_t(i), run.begin() + std::ptrdiff_t(std::min(run.size(), i + kMaxSlots)));
        p.slots.front().start = 1;
        pieces.push_back(std::move(p));
    }
}

}  // namespace

Plan make_plan(const Request& request) {
    Plan plan;
    std::vector<Piece> pieces;
    const auto& wanted = request.wanted;
    if (request.method == ZernikeMethod::Kintner) {
        plan.kind = PlanKind::Chain;
        std::map<int, std::vector<PlanSlot>> by_m;  // chains in n ascending for each m
        for (std::size_t k = 0; k < wanted.size(); ++k) by_m[wanted[k].m].push_back({wanted[k].n, wanted[k].m, 0, int(k)});
        for (auto& [m, chain] : by_m) {
            std::sort(chain.begin(), chain.end(), [](const PlanSlot& a, const PlanSlot& b) { return a.n < b.n; });
            split(chain, pieces);
        }
    } else if (request.method == ZernikeMethod::QRecursive) {
        plan.kind = PlanKind::QRec;
        std::map<int, std::vector<PlanSlot>> by_n;  // repetitions in m descending for each order
        for (std::size_t k = 0; k < wanted.size(); ++k) by_n[wanted[k].n].push_back({wanted[k].n, wanted[k].m, 0, int(k)});
        for (auto& [n, order] : by_n) {
            std::sort(order.begin(), order.end(), [](const PlanSlot& a, const PlanSlot& b) { return a.m > b.m; });
            split(order, pieces);
        }
        // One order per task: the downward recursion is not shared between orders.
        plan.tasks = int(pieces.size());
        plan.slots.assign(pieces.size() * kMaxSlots, PlanSlot{});
        for (std::size_t t = 0; t < pieces.size(); ++t) {
            plan.slot_count.push_back(int(pieces[t].slots.size()));
            std::copy(pieces[t].slots.begin(), pieces[t].slots.end(), plan.slots.begin() + std::ptrdiff_t(t * kMaxSlots));
        }
        return plan;
    } else {  // Direct: every moment on its own (Stable = a Kintner chain m → n; Explicit = the β sum)
        plan.kind = request.radial == ZernikeRadial::Explicit ? PlanKind::Explicit : PlanKind::Chain;
        for (std::size_t k = 0; k < wanted.size(); ++k) {
            Piece p;
            p.slots.push_back({wanted[k].n, wanted[k].m, 1, int(k)});
            pieces.push_back(std::move(p));
        }
    }
    pack(std::move(pieces), plan);
    return plan;
}

}  // namespace cubekit::zernike
