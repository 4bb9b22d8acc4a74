set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/chain-vs-star/timeline.png'
set title "chain-vs-star: where each node's time went, model (n=4096, all nodes, median run)"
set ylabel 'seconds'
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics rotate by -30
plot 'experiments/results/chain-vs-star/timeline.dat' using 2:xtic(1) title 'computing', '' using 3 title 'receiving or waiting for data', '' using 4 title 'idle until every node was released'
